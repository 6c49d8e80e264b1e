"""Claims of tool work in a reply, with what each claim says about time.

A reply can say that work is **done** ("I've cancelled your reservation", "your bags have
been added", "I double-checked your account"), **happening now** ("I'm updating it now",
"let me check the flights", "please hold while I look that up"), or **offered** ("I can
update it for you", "once you confirm, I'll update it", "I'll search flights. Which date
works?"). Only the first two are claims a tool must back; an offer waits for the user.

:func:`find_claims` reads a reply sentence by sentence and returns :class:`Claim` objects
with the verb, its kind (``read``/``write``, from :mod:`~guardtrace.collectors.replies.verbs`),
its time (``done``/``now``) and the words around it, so the detector can match the claim
to the calls that ran. Offers, conditions on the user, negations, plans followed by a
question to the user, and text in quotes or code are dropped here.

Each pattern runs once over the whole reply (tried only where its start literal occurs,
and skipped when a word it needs is absent), with bounded repetition; a match is then
judged within its sentence, in windows of bounded size. The cost is linear in the reply.
"""

from __future__ import annotations

import bisect
import functools
import re
from dataclasses import dataclass
from typing import Any

from .verbs import (
    READ,
    READ_VERBS,
    WRITE,
    WRITE_VERBS,
    ing_forms,
    past_forms,
)

__all__ = ["DONE", "NOW", "Claim", "find_claims", "mask_quoted", "sentences"]

DONE = "done"
NOW = "now"
# Characters around a claim that decide what it is (a negation before it, an object or a
# colon after it), and the most claims one reply is read for.
_WINDOW = 200
_MAX_CLAIMS = 256

# Verbs of the lexicon that, in a reply, describe the reply itself or the conversation
# ("let me list the options", "I'll show you", "let me see", "I'll get back to you").
_NOT_CLAIM_VERBS = frozenset({
    "list", "show", "describe", "see", "get", "count", "open", "close", "set", "log",
    "mark", "record", "place", "move", "study", "download", "monitor", "file", "release",
    "request", "block", "lock", "switch", "pull", "look", "complete", "reject",
    "decline", "approve", "scroll", "goto", "consult", "track",
})
# Multi-word verbs a reply uses for lookups.
_PHRASAL_READ = ("look up", "look into", "look at", "look over", "look through",
                 "look it up", "look that up", "look this up", "look them up",
                 "pull it up", "pull that up", "pull them up",
                 "pull up", "go through", "dig into", "take a look", "have a look",
                 "take a closer look", "take a quick look", "take a careful look",
                 "have a closer look", "have a quick look", "understand",
                 "get a clearer picture", "get a better picture", "get a full picture",
                 "get a clearer view", "get a better view", "get a better understanding",
                 "get a clearer understanding", "get a better sense",
                 "double-check", "double check", "re-check", "cross-check")
_PHRASAL_READ_DONE = ("looked up", "looked into", "looked at", "looked over",
                      "looked through", "pulled up", "gone through", "went through",
                      "dug into", "took a look", "had a look", "double-checked",
                      "double checked", "re-checked", "cross-checked")
_PHRASAL_READ_NOW = ("looking up", "looking into", "looking at", "looking over",
                     "looking through", "pulling up", "going through", "digging into",
                     "taking a look", "having a look", "double-checking",
                     "double checking", "re-checking", "cross-checking")

# Multi-word verbs of writing: (base, past, -ing).
_PHRASAL_WRITE = (("kick off", "kicked off", "kicking off"), ("roll out", "rolled out",
                   "rolling out"), ("roll back", "rolled back", "rolling back"),
                  ("spin up", "spun up", "spinning up"), ("set up", "set up", "setting up"),
                  ("fire off", "fired off", "firing off"), ("sign up", "signed up",
                   "signing up"))

# Nouns that stand for a verb after "proceed with", "process", "complete": "I'll proceed
# with the cancellation" claims cancelling.
_ACTION_NOUNS = {
    "booking": "book", "cancellation": "cancel", "modification": "modify",
    "update": "update", "updates": "update", "change": "change", "changes": "change",
    "transfer": "transfer", "refund": "refund", "upgrade": "upgrade",
    "downgrade": "downgrade", "payment": "pay", "reservation": "book",
    "rebooking": "rebook", "exchange": "change", "removal": "remove",
    "addition": "add", "search": "search", "lookup": "lookup", "review": "review",
    "verification": "verify", "check": "check",
}

# Words that make a sentence an offer, a condition or a question to the user: a claim
# of work that waits for someone else.
_CONDITIONAL_RE = re.compile(
    r"\b(?:if\s+(?:you|your|u|it['’]?s|it\s+is|that|this|so|needed|necessary|possible|"
    r"required|desired|preferred|applicable|everything|all|there['’]?s|we|i)\b|"
    r"once\s+(?!more\b)|unless|whenever|when\s+you|after\s+you|as\s+soon\s+as|upon|pending|"
    r"before\s+(?:i|we)\b|would\s+you|do\s+you\s+want|shall\s+i|should\s+i|can\s+i|"
    r"could\s+i|may\s+i|want\s+me|like\s+me\s+to|let\s+me\s+know|please\s+confirm|"
    r"confirm\s+(?:if|whether|that|the|your|you)|your\s+confirmation|can\s+(?:also\s+)?"
    r"(?:help|assist)|i\s+can\b|we\s+can\b|i\s+could|we\s+could|happy\s+to|glad\s+to|"
    r"able\s+to|unable|willing\s+to|would\s+be|ready\s+to|need\s+(?:you|your)|"
    r"in\s+order\s+to|to\s+do\s+(?:so|this|that))",
    re.IGNORECASE)
# A sentence that asks the user to act: confirm, provide, choose.
_REQUEST_RE = re.compile(
    r"\b(?:please|kindly)\s+(?:\w+\s+){0,2}?(?:confirm|provide|let\s+me\s+know|share|"
    r"choose|select|specify|tell|reply|respond|advise|check|verify|review|send|give)\b|"
    r"\blet\s+me\s+know\b|\b(?:confirm|reply)\s+(?:with\s+)?[\"'“]?yes\b|"
    r"\b(?:once|when|after|as\s+soon\s+as)\s+you\b|^\W{0,8}if\b",
    re.IGNORECASE)
_NEGATION_RE = re.compile(r"\b(?:not|never|no\s+longer|cannot|can['’]t|couldn['’]t|"
                          r"won['’]t|didn['’]t|haven['’]t|hasn['’]t|wasn['’]t|"
                          r"weren['’]t|isn['’]t|aren['’]t|don['’]t|doesn['’]t|unable)\b",
                          re.IGNORECASE)
# "to ensure the data has been applied", "glad to hear roaming is now enabled": the
# sentence is about checking or hearing of a state, not a report of the agent's work.
_EMBEDDED_RE = re.compile(r"\b(?:ensure|make\s+sure|verify|confirm|check|see|whether|if|"
                          r"glad|happy|hear|hope|seems?|appears?|looks?\s+like|sounds?\s+"
                          r"like|noted|understand)\b", re.IGNORECASE)
# Reading a policy or the rules needs no tool: it is in the system prompt.
_NO_TOOL_READ_RE = re.compile(r"\b(?:polic(?:y|ies)|rules?|guidelines?|terms|eligib\w*|"
                              r"conditions?)\b(?!\s+(?:handbook|document|file|page|pdf|doc|"
                              r"manual|repository|folder|database))", re.IGNORECASE)
# "might have been booked", "will have been processed": possibility, not a report.
_MODAL_RE = re.compile(r"\b(?:might|may|could|would|should|must|will|shall|can)\s+"
                       r"(?:(?:not|also|already|likely|probably)\s+)?(?:have|has|be)\b",
                       re.IGNORECASE)
# A claim that says the work is new this turn, not a report of earlier work.
# "too", "also", "as well": more work than before, so not a report of an earlier turn.
_FRESH_RE = re.compile(r"\b(?:again|re-?(?:checked|checking|check|reviewed|verified)|"
                       r"double[- ]?check\w*|once\s+more|just\s+now|a\s+second\s+time|"
                       r"further|another\s+look|re-?ran|re-?run|too|also|as\s+well)\b",
                       re.IGNORECASE)

_ADV = (r"(?:\s+(?:just|now|already|also|successfully|finally|then|first|quickly|"
        r"previously|recently|actually|thoroughly|carefully|since|all|both|fully|"
        r"immediately|indeed|again|personally|manually|gone\s+ahead\s+and|went\s+ahead\s+"
        r"and|go\s+ahead\s+and|proceed\s+to|proceeded\s+to|now\s+proceed\s+to)){0,3}")
_SUBJ = r"\b(?:i|we)"
_APOS = "['’]"


@dataclass(frozen=True, slots=True)
class Claim:
    """One claim of tool work.

    Attributes:
        kind: ``"write"`` or ``"read"``.
        time: ``"done"`` (completed) or ``"now"`` (in progress or about to happen).
        verb: The verb's base form (``"update"``, ``"check"``).
        phrase: The words that make the claim, as written.
        sentence: The claim's sentence, lower-cased (its objects are in it); for a very
            long sentence, the words around the claim.
        fresh: The claim says the work is new ("again", "double-checked", "too").
    """

    kind: str
    time: str
    verb: str
    phrase: str
    sentence: str
    fresh: bool = False


# What follows the verb can show the words are not a claim of tool work:
_AFTER_NOT_CLAIM_RE = re.compile(
    # figurative ("building on your idea"), "checking in", interpretation ("reading this
    # as a request"), the conversation itself as the object ("read your message").
    r"\s+on\s+(?:your|that|this|what|top\s+of)\b"
    r"|\s+in\b(?!\s+(?:the|your|our|my|to)\b)"
    r"|\s+(?:(?:this|that|it|you|your\s+\w+|the\s+\w+)\s+)?as\b"
    r"|\s+(?:(?:your|this|the|that|my)\s+)?(?:(?:last|previous|earlier|original)\s+)?"
    r"(?:message|question|request|reply|comment|prompt|feedback|point|answer|words)\b"
    r"|\s+(?:what|how|why|whether)\s+(?:you|we)\b",
    re.IGNORECASE)
# Content that is in this reply: "I've rewritten the function below".
_INLINE_RE = re.compile(r"\b(?:below|above|the\s+following|in\s+this\s+(?:reply|message|"
                        r"answer|response))\b", re.IGNORECASE)

# Regions whose words are quoted, not said: fenced code, inline code, double-quoted spans
# on one line, blockquote lines, and guard disclaimers appended to a reply earlier.
_QUOTED_RE = re.compile(
    r"```.*?(?:```|\Z)|`[^`\n]*\s[^`\n]*`|\"[^\"\n]*\"|“[^”\n]*”|^[ \t]*>[^\n]*|^⚠️[^\n]*",
    re.DOTALL | re.MULTILINE)
# A sentence ends at . ! ? or a line break; a dot inside a number or a name ("$1.5",
# "app.py") does not end it.
_SENTENCE_RE = re.compile(r"(?:[^.!?\n]|\.(?=\w))+[.!?]*")


def mask_quoted(text: str) -> str:
    """``text`` with quoted regions blanked (same length, so offsets still hold)."""
    if not any(c in text for c in '`"“>⚠'):
        return text
    return _QUOTED_RE.sub(lambda m: " " * (m.end() - m.start()), text)


def sentences(text: str) -> list[tuple[int, str]]:
    """``(offset, sentence)`` pairs of ``text``; blank ones dropped."""
    return [(m.start(), m.group()) for m in _SENTENCE_RE.finditer(text) if m.group().strip()]


# Work said without a lexicon verb: the field reports' "Still working on it", "I'm on it",
# "Beginning the refactor", "I'm running the tests", "I'm calling write_file now". The
# guards after "running"/"run"/"calling" keep descriptions and idioms quiet: "I'm running
# Claude Sonnet through OpenRouter", "I've run into a problem", "I'm calling it a day".
_MODEL_NAMES = (
    r"(?:claude|sonnet|haiku|opus|chatgpt|gpt[\w.\-]*|o[1-9](?:-\w+)?|gemini|gemma|llama"
    r"[\w.\-]*|mistral|mixtral|codestral|qwen[\w.\-]*|deepseek[\w.\-]*|grok|phi-?\d|"
    r"command[\s-]r|cohere|openai|anthropic|openrouter|ollama|vllm|bedrock|vertex|azure|"
    r"groq|fireworks|kimi|glm|falcon)\b")
_RUNNING_IS_DESCRIPTION = (
    r"(?!\s+(?:(?:the\s+|an?\s+)?" + _MODEL_NAMES +
    r"|(?:the\s+|an?\s+)?(?:latest|newest|current|same|default|older|newer|stable|beta|"
    r"local|hosted|quantized|quantised|fine-?tuned|distilled)\b"
    r"|(?:an?|the)\s+(?:[\w.\-]+\s+){0,2}(?:model|llm)\b"
    r"|(?:on|in|inside|within|under|with|as|atop|via|through|behind|from|at|off|low|out|"
    r"late|short|version|release|locally|fine|smoothly|well|okay|ok)\b|v?\d))")
_RUN_IDIOM = (r"(?!\s+(?:into|by|through|out|across|low|short|late)\b"
              r"|\s+(?:[\w\-]+\s+){1,2}(?:by|past)\s+(?:you|u|me|him|her|them|us)\b)")
_CALL_OBJECT = (r"\s+(?:`?[A-Za-z]\w*_\w+`?|(?:the\s+)?[\w\-]+\s+"
                r"(?:tool|function|api|endpoint|command|script|webhook))")
_WORK_NOUN = (r"(?:refactor(?:ing)?|deploy(?:ment)?|migration|rewrite|build|fix|patch|"
              r"implementation|rollout|upgrade|install(?:ation)?|changes?|edits?|update|"
              r"commit|push|release|tests?|suite|pipeline|job|workflow|run|backup|sync)\b")
_WORK_OBJECT = (r"(?:it|this|that|the\s+(?:fix|patch|changes?|refactor|deploy(?:ment)?|"
                r"migration|implementation|update|rollout|release))\b")
_I_AM = r"\b(?:i|we)(?:['’]m|\s+am|\s+are|['’]re)"
# The start of a sentence, for patterns run over a whole reply (see `sentences`).
_SENT = r"(?:^|(?<=[.!?\n])|(?<=[.!?] ))"
_WORK_PATTERNS = (
    # (pattern, time, words one of which every match contains)
    (rf"{_I_AM}(?:\s+(?:now|still|currently|just|already))?\s+(?P<v>working)\s+(?:on|through)"
     rf"\s+{_WORK_OBJECT}", NOW, ("working",)),
    (rf"(?:{_SENT}\W{{0,8}}|(?<=[,.!;] ))(?:(?:still|now)\s+)?(?P<v>working)\s+(?:on|through)\s+"
     rf"{_WORK_OBJECT}", NOW, ("working",)),
    (rf"{_I_AM}\s+(?P<v>on)\s+it\b", NOW, ("on it",)),
    (rf"{_SENT}\W{{0,8}}(?:(?:i|we)(?:['’]m|\s+am|\s+are)\s+)?"
     rf"(?P<v>beginning|starting|kicking\s+off|"
     rf"commencing)\s+(?:on\s+)?(?:the|a|my|work\s+on\s+the)\s+(?:[\w\-]+\s+)?{_WORK_NOUN}",
     NOW, ("beginning", "starting", "kicking", "commencing")),
    (rf"{_I_AM}(?:\s+(?:now|still|currently|just|also))?\s+(?P<v>running)\b"
     rf"{_RUNNING_IS_DESCRIPTION}", NOW, ("running",)),
    (rf"(?:\blet\s+me|\b(?:i|we)(?:['’]ll|\s+will|(?:['’]m|\s+am)\s+going\s+to))"
     rf"(?:\s+(?:now|just|also|quickly|first|go\s+ahead\s+and)){{0,3}}\s+(?P<v>run)\b"
     rf"{_RUN_IDIOM}", NOW, ("run",)),
    (rf"\b(?:i|we)(?:['’]ve|\s+have)(?:\s+(?:now|just|also|already))?\s+(?P<v>run)\b"
     rf"{_RUN_IDIOM}", DONE, ("run",)),
    (rf"{_I_AM}(?:\s+(?:now|just|also))?\s+(?P<v>calling){_CALL_OBJECT}", NOW, ("calling",)),
    (rf"\b(?:i|we)(?:['’]ve|\s+have)(?:\s+(?:now|just|also|already))?\s+(?P<v>called)"
     rf"{_CALL_OBJECT}", DONE, ("called",)),
)


def _token(char: str) -> str:
    return r"\s+" if char == " " else "[- ]?" if char == "-" else re.escape(char)


def _alternation(words: set[str]) -> str:
    """One regex for a set of words, as a trie: "up(?:date|grade)" rather than
    "update|upgrade". The engine then tries each character once per position instead of
    once per word, which keeps hundreds of verb forms cheap; longer words are tried
    before their prefixes, so "double-checked" wins over "double"."""
    trie: dict[str, Any] = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(_token(char), {})
        node[""] = {}

    def build(node: dict[str, Any]) -> str:
        branches = [token + build(child) for token, child in sorted(node.items()) if token]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body

    return build(trie)


@functools.cache
def _lexicon() -> tuple[dict[str, tuple[str, str]], dict[str, tuple[str, str]],
                        dict[str, tuple[str, str]]]:
    """``form -> (kind, lemma)`` for the base, past and -ing forms of claim verbs."""
    base: dict[str, tuple[str, str]] = {}
    past: dict[str, tuple[str, str]] = {}
    ing: dict[str, tuple[str, str]] = {}
    for kind, verbs in ((WRITE, WRITE_VERBS), (READ, READ_VERBS)):
        for verb in verbs - _NOT_CLAIM_VERBS:
            base[verb] = (kind, verb)
            for form in past_forms(verb):
                past.setdefault(form, (kind, verb))
            for form in ing_forms(verb):
                ing.setdefault(form, (kind, verb))
    for phrase_base, phrase_past, phrase_ing in _PHRASAL_WRITE:
        verb = phrase_base.split()[0]
        base[phrase_base] = (WRITE, verb)
        past[phrase_past] = (WRITE, verb)
        ing[phrase_ing] = (WRITE, verb)
    for phrase in _PHRASAL_READ:
        base[phrase] = (READ, _phrasal_read_lemma(phrase, phrase.split()[0]))
    for table, phrases in ((past, _PHRASAL_READ_DONE), (ing, _PHRASAL_READ_NOW)):
        for phrase in phrases:
            table[phrase] = (READ, _phrasal_read_lemma(phrase, "look"))
    return base, past, ing


def _phrasal_read_lemma(phrase: str, default: str) -> str:
    # "double-checked" is checking, "took a look" looking.
    if "check" in phrase:
        return "check"
    return "look" if "look" in phrase else default


def _norm(form: str) -> str:
    return re.sub(r"[\s\-]+", " ", form.lower())


@functools.cache
def _patterns() -> list[tuple[re.Pattern[str], str, str, tuple[str, ...],
                             tuple[str, ...] | None]]:
    """(pattern, time, which lexicon, needed words, start literals); the verb is the
    group ``v``."""
    base, past, ing = _lexicon()
    b, p, g = _alternation(set(base)), _alternation(set(past)), _alternation(set(ing))
    nouns = _alternation(set(_ACTION_NOUNS))
    flags = re.IGNORECASE | re.MULTILINE
    done = [
        # "I've updated", "I have now cancelled", "we updated", "I double-checked".
        rf"{_SUBJ}(?:{_APOS}ve|\s+have|\s+had)?{_ADV}\s+(?P<v>{p})\b",
        # "Your reservation has been cancelled", "the bags have now been added".
        rf"\b(?:has|have|had)(?:\s+(?:now|also|already|successfully|just)){{0,2}}\s+been"
        rf"(?:\s+(?:successfully|now|fully|also)){{0,2}}\s+(?P<v>{p})\b",
        # "... is now confirmed/updated", "was successfully processed".
        rf"\b(?:is|are)\s+now\s+(?P<v>{p})\b",
        rf"\b(?:was|were)\s+(?:successfully|now)\s+(?P<v>{p})\b",
        # "Upon reviewing the details again, ...", "after checking your account, ...".
        rf"\b(?:upon|after)(?:\s+(?:further|closer|careful|another))?\s+(?P<v>{g})\b",
        # "Successfully cancelled your reservation."
        rf"{_SENT}\W{{0,8}}successfully\s+(?P<v>{p})\b",
    ]
    now = [
        # "I'm updating", "we are now processing".
        rf"{_SUBJ}(?:{_APOS}m|\s+am|\s+are|{_APOS}re){_ADV}\s+(?P<v>{g})\b",
        # "Let me check", "let me go ahead and cancel".
        rf"\blet\s+me{_ADV}\s+(?P<v>{b})\b",
        # "I'll update", "I will now proceed to cancel", "I'm going to search".
        rf"{_SUBJ}(?:{_APOS}ll|\s+will|\s+shall|(?:{_APOS}m|\s+am|\s+are)\s+(?:going\s+to|"
        rf"about\s+to)){_ADV}\s+(?P<v>{b})\b",
        # "please hold while I check", "one moment while I look that up".
        rf"\bwhile\s+(?:i|we){_ADV}\s+(?P<v>{b}|{g})\b",
        # "Updating your reservation now."
        rf"{_SENT}\W{{0,8}}(?P<v>{g})\b[^.!?\n]{{0,80}}\bnow\b",
    ]
    proceed = [
        # "I'll proceed with the cancellation", "I'm processing the refund now".
        rf"{_SUBJ}(?:{_APOS}ll|\s+will|{_APOS}m|\s+am|\s+are)?{_ADV}\s+(?:proceed(?:ing)?|"
        rf"process(?:ing)?|complet(?:e|ing)|finaliz(?:e|ing)|initiat(?:e|ing)|"
        rf"handl(?:e|ing)|mak(?:e|ing))\s+(?:with\s+)?(?:the\s+|your\s+|this\s+|that\s+)?"
        rf"(?:\w+\s+){{0,2}}?(?P<n>{nouns})\b",
        rf"\blet\s+me{_ADV}\s+(?:proceed|process|complete|finalize|initiate|handle|make)\s+"
        rf"(?:with\s+)?(?:the\s+|your\s+|this\s+|that\s+)?(?:\w+\s+){{0,2}}?(?P<n>{nouns})\b",
    ]
    # List items without a subject: "- **Checked bag:** 1 checked bag added",
    # "- Upgraded to business class". Writes only: "checked bag" is not a check.
    fragment = (rf"^[ \t]*(?:[-*•]|\d+[.)])[ \t]*(?:\*\*[^*\n]{{1,40}}\*\*:?[ \t]*|"
                rf"[A-Za-z ]{{1,30}}:[ \t]*)?(?:[\w$.,]+[ \t]+){{0,4}}?(?P<v>{p})\b"
                rf"(?=[ \t]*(?:$|\(|to\b|with\b|for\b|on\b|in\b|from\b|successfully\b))")
    # Each pattern with the words one of which its matches contain (a reply without any
    # of them skips the pattern: a substring test in C, against a regex scan), and the
    # literals its matches start with (the pattern is then tried only where one occurs,
    # found by str.find, instead of at every character; None: no such literal).
    subject = ("i ", "i'", "i’", "we ", "we'", "we’")
    starts_subject = ("i'", "i’", "i ", "i\n", "we'", "we’", "we ", "we\n")
    done_hints = ((subject, starts_subject), (("been",), ("has", "have", "had")),
                  (("now",), ("is", "are")), (("successfully", "now"), ("was", "were")),
                  (("upon", "after"), ("upon", "after")), (("successfully",), None))
    now_hints = ((("i'm", "i’m", "i am", "we are", "we're", "we’re"), starts_subject),
                 (("let",), ("let",)),
                 (("i'll", "i’ll", "will", "shall", "going", "about"), starts_subject),
                 (("while",), ("while",)), (("now",), None))
    proceed_needs = ("proceed", "process", "complet", "finaliz", "initiat", "handl", "mak")
    out = [(re.compile(x, flags), DONE, "ing" if "upon" in x else "past", needs, starts)
           for x, (needs, starts) in zip(done, done_hints, strict=True)]
    out += [(re.compile(x, flags), t, "work", needs,
             starts_subject if x.startswith(_I_AM) else None)
            for x, t, needs in _WORK_PATTERNS]
    out.append((re.compile(fragment, flags), DONE, "fragment", ("-", "*", "•", ".", ")"),
                None))
    out += [(re.compile(x, flags), NOW, "now", needs, starts)
            for x, (needs, starts) in zip(now, now_hints, strict=True)]
    out += [(re.compile(proceed[0], flags), NOW, "noun", proceed_needs, starts_subject),
            (re.compile(proceed[1], flags), NOW, "noun", proceed_needs, ("let",))]
    return out


def _lookup(form: str, which: str) -> tuple[str, str] | None:
    key = _norm(form)
    if which == "work":
        return WRITE, key.split()[0]
    if which == "noun":
        verb = _ACTION_NOUNS.get(key)
        if verb is None:
            return None
        kind = READ if verb in READ_VERBS else WRITE
        return kind, verb
    return _tables()[which if which in ("past", "ing") else
                     "past" if which == "fragment" else "now"].get(key)


@functools.cache
def _tables() -> dict[str, dict[str, tuple[str, str]]]:
    """The lexicon keyed by normalised form, per pattern family."""
    base, past, ing = _lexicon()

    def norm(table: dict[str, tuple[str, str]]) -> dict[str, tuple[str, str]]:
        return {_norm(k): v for k, v in table.items()}

    return {"past": norm(past), "ing": norm(ing), "now": norm({**base, **ing})}


# Participles that name a record's state in a listing ("Payment: paid with a gift card",
# "Status: booked"), not work just done.
_STATUS_VERBS = frozenset({"pay", "book", "reserve", "schedule", "charge", "create",
                           "register", "subscribe", "set", "place", "issue", "close",
                           "lock", "block", "suspend", "enable", "disable", "cancel"})


def _matches(pattern: re.Pattern[str], text: str, lowered: str | None,
             starts: tuple[str, ...] | None) -> list[re.Match[str]]:
    """``pattern.finditer(text)``, tried only where a start literal occurs."""
    if starts is None or lowered is None:
        return list(pattern.finditer(text))
    positions: set[int] = set()
    for literal in starts:
        at = lowered.find(literal)
        while at >= 0:
            positions.add(at)
            at = lowered.find(literal, at + 1)
    out: list[re.Match[str]] = []
    end = 0
    for at in sorted(positions):
        if at < end:
            continue  # finditer semantics: matches do not overlap
        match = pattern.match(text, at)  # sees the characters before `at` for \b
        if match is not None and match.end() > at:
            out.append(match)
            end = match.end()
    return out


class _Relative:
    """A match of the whole reply, seen from the start of its sentence."""

    __slots__ = ("_match", "_offset", "string")

    def __init__(self, match: re.Match[str], offset: int, sentence: str) -> None:
        self._match, self._offset = match, offset
        self.string = sentence

    def group(self, name: str | int = 0) -> str:
        return self._match.group(name)

    def start(self, name: str | int = 0) -> int:
        return self._match.start(name) - self._offset

    def end(self, name: str | int = 0) -> int:
        return self._match.end(name) - self._offset


def _status_value(match: _Relative) -> bool:
    # "- **Payment:** Paid" states a record's status; "- 1 bag added" and "- Upgraded to
    # business" report work.
    head = match.string[:match.start("v")]
    label_end = max(head.rfind(":"), head.rfind("*"), head.rfind("-"), head.rfind("•"))
    words_before = head[label_end + 1:].strip()
    rest = match.string[match.end("v"):].lstrip()
    return not words_before and (not rest or rest.startswith("("))


def find_claims(reply: str) -> list[Claim]:
    """The claims of tool work in ``reply``, in order.

    Args:
        reply: The assistant's text.

    Returns:
        Claims that a tool must back: completed ones, and ones happening now that are
        not offers, conditions on the user, or plans followed by a question.
    """
    text = mask_quoted(reply)
    parts = sentences(text)
    # A question or a request to the user claims nothing, and a plan followed by one
    # waits for the user.
    asks = [sentence.rstrip().endswith("?") or bool(_REQUEST_RE.search(sentence))
            for _, sentence in parts]
    questions_after = [False] * len(parts)
    for i in range(len(parts) - 2, -1, -1):
        questions_after[i] = questions_after[i + 1] or asks[i + 1]
    claims: list[Claim] = []
    claim_spans: list[tuple[int, int]] = []
    starts = [offset for offset, _ in parts]
    lowered_parts: dict[int, str] = {}
    conditional: dict[int, bool] = {}
    # Each pattern runs once over the whole reply (a scan per sentence would cost a call
    # per sentence and pattern); a match is then judged within its sentence.
    lowered_text = " ".join(text.lower().split())  # "I  am" is "i am" to the prefilter
    exact_lower = text.lower()
    if len(exact_lower) != len(text):
        exact_lower = None  # a few characters lower-case to two: offsets would drift
    for pattern, time, which, needs, hints in _patterns():
        if not any(word in lowered_text for word in needs):
            continue
        for whole in _matches(pattern, text, exact_lower, hints):
            i = bisect.bisect_right(starts, whole.start()) - 1
            if i < 0:
                continue
            offset, sentence = parts[i]
            if whole.end() > offset + len(sentence):
                continue  # the match runs into the next sentence
            if asks[i] or len(claims) >= _MAX_CLAIMS:
                continue
            lowered = lowered_parts.get(i)
            if lowered is None:
                lowered = lowered_parts[i] = sentence.lower()
            match = _Relative(whole, offset, sentence)
            form = match.group("n") if which == "noun" else match.group("v")
            found = _lookup(form, which)
            if found is None:
                continue
            kind, verb = found
            if which == "ing" and kind == WRITE:
                continue  # "after enabling roaming, ..." is often the user's doing
            if which == "fragment" and (kind != WRITE or verb in _STATUS_VERBS
                                        or _status_value(match)):
                continue
            # The words around the claim, in bounded windows: a sentence with many
            # claims in it still costs time linear in its length.
            before = lowered[max(0, match.start() - _WINDOW):match.start()]
            # "I haven't updated", "I can't check": a negation in the clause before
            # the verb.
            clause = (re.split(r"[,;:]|\bbut\b|\band\b", before)[-1]
                      + lowered[match.start():match.end()])
            if _NEGATION_RE.search(clause) or _MODAL_RE.search(clause):
                continue
            after = sentence[match.end():match.end() + _WINDOW]
            if _AFTER_NOT_CLAIM_RE.match(after) or _INLINE_RE.search(after):
                continue
            if time == DONE and which == "past" and not re.match(
                    r"\s*(?:i|we)\b", match.group(), re.IGNORECASE) and \
                    _EMBEDDED_RE.search(before):
                continue
            if kind == READ and _NO_TOOL_READ_RE.search(
                    lowered[match.start():match.end() + _WINDOW]):
                continue
            if time == NOW:
                if i not in conditional:
                    conditional[i] = bool(_CONDITIONAL_RE.search(lowered))
                if conditional[i] or ":" in after or questions_after[i]:
                    continue
            claim_spans.append((offset + match.start(), offset + match.end()))
            # The claim's own words: its sentence, or a window of a very long one.
            context = lowered[max(0, match.start() - _WINDOW):match.end() + _WINDOW]
            claims.append(Claim(kind=kind, time=time, verb=verb,
                                phrase=" ".join(match.group().split()), sentence=context,
                                fresh=bool(_FRESH_RE.search(context))))
    # Overlapping matches of one claim ("I'm kicking off the build" is a work phrase and a
    # phrasal verb): the shortest, earliest speaks for it. Then reading order.
    kept: list[Claim] = []
    kept_end = -1
    for claim, span in sorted(zip(claims, claim_spans, strict=True), key=lambda x: x[1]):
        if span[0] < kept_end:
            continue  # overlaps a claim kept before it (spans come sorted by start)
        kept.append(claim)
        kept_end = span[1]
    claims = kept
    # "Let me first check the flights; then we'll change the dates": the writes wait for
    # the read, so they are a plan, not work under way.
    if any(c.kind == READ and c.time == NOW and re.search(r"\bfirst\b", c.phrase + " "
                                                           + c.sentence) for c in claims):
        claims = [c for c in claims if not (c.kind == WRITE and c.time == NOW)]
    return claims
