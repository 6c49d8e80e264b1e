"""The claim patterns: which words in a reply claim tool work, and when.

The lexicon (claim verbs from :mod:`~guardtrace.collectors.replies.verbs` in their base,
past and -ing forms, multi-word verbs, action nouns) and the regexes built from it, one
per way of saying work is done ("I've updated", "has been cancelled", "- 1 bag added")
or under way ("I'm updating", "let me check", "I'll proceed with the cancellation",
"I'm on it"). :func:`~guardtrace.collectors.replies.claims.find_claims` runs them and
judges each match within its sentence.

The verb alternations are tries, so hundreds of verb forms stay cheap; the patterns are
built and compiled on first use, not at import.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from .verbs import (
    CONCESSION_VERBS,
    READ,
    READ_VERBS,
    WRITE,
    WRITE_VERBS,
    ing_forms,
    past_forms,
)

__all__ = ["DONE", "NOW", "Starts", "claim_patterns", "lookup_verb"]

# What a claim says about time: the work is done, or happening now.
DONE = "done"
NOW = "now"
# Where a pattern's matches start (see `claim_patterns`).
Starts = tuple[str, ...] | str | re.Pattern[str] | None
# A needed word written between "\b"s must occur as a whole word, as it does in every
# match of the patterns that need it so: most replies end with "let me know", which
# holds "now" only inside a word ("checked bags" holds "check" so).
_NOW_WORD = r"\bnow\b"

# Verbs of the lexicon that, in a reply, describe the reply itself or the conversation
# ("let me list the options", "I'll show you", "let me see", "I'll get back to you").
_NOT_CLAIM_VERBS = frozenset({
    "list", "show", "describe", "see", "get", "count", "open", "close", "set", "log",
    "mark", "record", "place", "move", "study", "download", "monitor", "file", "release",
    "request", "block", "lock", "switch", "pull", "look", "complete", "reject",
    "decline", "approve", "scroll", "goto", "consult", "track",
})
# Verbs whose -ing form describes a state, not work under way: "I'm running Claude
# through OpenRouter", "I'm running v2.3". "I ran the tests" and "let me run them" are
# still claims.
_NO_ING_CLAIM_VERBS = frozenset({"run", "rerun"})
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
                   "signing up"),
                  # "I've taken care of the refund": any write the claim's words fit.
                  ("take care of", "taken care of", "taking care of"))

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

_ADV = (r"(?:\s+(?:just|now|already|also|successfully|finally|then|first|quickly|currently|"
        r"previously|recently|actually|thoroughly|carefully|since|all|both|fully|"
        r"immediately|indeed|again|personally|manually|gone\s+ahead\s+and|went\s+ahead\s+"
        r"and|go\s+ahead\s+and|proceed\s+to|proceeded\s+to|now\s+proceed\s+to)){0,3}")
_SUBJ = r"\b(?:i|we)"
_APOS = "['’]"


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
# The marks before a sentence's first word ("- **", "1. ", "✅ "), taken whole: what
# follows starts with a letter, so giving marks back could never let it match, and each
# one given back would try the verb alternation again (most of the cost at a list line).
_MARKS = r"\W{0,8}+"
# Where a pattern's matches can start, when no literal marks it: at a sentence start (the
# positions `_SENT` allows), at one or after a comma or semicolon and a space (those of
# `(?:{_SENT}|(?<=[,.!;] ))`), or at a line start (`^`). The matcher then tries only there.
SENTENCE_STARTS = "<sentence starts>"
CLAUSE_STARTS = "<clause starts>"
LINE_STARTS = "<line starts>"
# The literals "I"/"we" claims start with, found by str.find in the lower-cased reply.
_SUBJECT_STARTS = ("i'", "i’", "i ", "i\n", "we'", "we’", "we ", "we\n")
# Start finders: for a pattern whose start no few literals mark ("i" and any space), a
# case-sensitive pattern run over the lower-cased reply, whose matches start wherever the
# pattern's can. Each alternative starts with a letter, so the engine skips in C from
# one of those letters to the next (a nested group first would make it try every
# position). See `claims._start_positions` for when lower-casing allows it.
_SUBJECT_FINDER = r"let(?=\s)|i(?=[\s'’])|we(?=[\s'’])"
# Each work pattern: (pattern, time, words one of which every match contains, where it
# starts: "subject" for `_SUBJECT_STARTS`, "finder" for `_SUBJECT_FINDER`, or a
# position kind).
_WORK_PATTERNS = (
    (rf"{_I_AM}(?:\s+(?:now|still|currently|just|already))?\s+(?P<v>working)\s+(?:on|through)"
     rf"\s+{_WORK_OBJECT}", NOW, ("working",), "subject"),
    (rf"(?:{_SENT}{_MARKS}|(?<=[,.!;] ))(?:(?:still|now)\s+)?(?P<v>working)\s+(?:on|through)\s+"
     rf"{_WORK_OBJECT}", NOW, ("working",), CLAUSE_STARTS),
    (rf"{_I_AM}\s+(?P<v>on)\s+it\b", NOW, ("on it",), "subject"),
    (rf"{_SENT}{_MARKS}(?:(?:i|we)(?:['’]m|\s+am|\s+are)\s+)?"
     rf"(?P<v>beginning|starting|kicking\s+off|commencing|running|rerunning)\s+(?:on\s+)?"
     rf"(?:the|a|my|work\s+on\s+the)\s+(?:[\w\-]+\s+)?{_WORK_NOUN}",
     NOW, ("beginning", "starting", "kicking", "commencing", "running"), SENTENCE_STARTS),
    (rf"{_I_AM}(?:\s+(?:now|still|currently|just|also))?\s+(?P<v>running)\b"
     rf"{_RUNNING_IS_DESCRIPTION}", NOW, ("running",), "subject"),
    (rf"(?:\blet\s+me|\b(?:i|we)(?:['’]ll|\s+will|(?:['’]m|\s+am)\s+going\s+to))"
     rf"(?:\s+(?:now|just|also|quickly|first|go\s+ahead\s+and)){{0,3}}\s+(?P<v>run)\b"
     rf"{_RUN_IDIOM}", NOW, ("run",), "finder"),
    (rf"\b(?:i|we)(?:['’]ve|\s+have)(?:\s+(?:now|just|also|already))?\s+(?P<v>run)\b"
     rf"{_RUN_IDIOM}", DONE, ("run",), "finder"),
    (rf"{_I_AM}(?:\s+(?:now|just|also))?\s+(?P<v>calling){_CALL_OBJECT}", NOW, ("calling",),
     "subject"),
    (rf"\b(?:i|we)(?:['’]ve|\s+have)(?:\s+(?:now|just|also|already))?\s+(?P<v>called)"
     rf"{_CALL_OBJECT}", DONE, ("called",), "finder"),
)


# The lemma of a work pattern's verb where its first word is not one ("running": run).
_WORK_LEMMAS = {"running": "run", "rerunning": "rerun", "calling": "invoke", "called": "invoke"}


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
            if verb in _NO_ING_CLAIM_VERBS:
                continue
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
def claim_patterns() -> list[tuple[re.Pattern[str], str, str, tuple[str, ...], Starts]]:
    """(pattern, time, which lexicon, needed words, where matches start: literals, a
    start finder, :data:`SENTENCE_STARTS`/:data:`CLAUSE_STARTS`/:data:`LINE_STARTS` or
    None); the verb is the group ``v`` (the action noun, group ``n``, for the ``noun``
    family). Built and compiled on first use."""
    base, past, ing = _lexicon()
    b, p, g = _alternation(set(base)), _alternation(set(past)), _alternation(set(ing))
    nouns = _alternation(set(_ACTION_NOUNS))
    concessions = _alternation({form for verb in CONCESSION_VERBS for form in past_forms(verb)})
    flags = re.IGNORECASE | re.MULTILINE
    done = [
        # "I've updated", "I have now cancelled", "we updated", "I double-checked".
        rf"{_SUBJ}(?:{_APOS}ve|\s+have|\s+had)?{_ADV}\s+(?P<v>{p})\b",
        # "Your reservation has been cancelled", "the bags have now been added", "it's
        # been cancelled" ("'s been" is "has been": "is been" is no English).
        rf"(?:\b(?:has|have|had)|(?<=\w){_APOS}s)(?:\s+(?:now|also|already|successfully|just))"
        rf"{{0,2}}\s+been"
        rf"(?:\s+(?:successfully|now|fully|also)){{0,2}}\s+(?P<v>{p})\b",
        # "... is now confirmed/updated", "was successfully processed".
        rf"\b(?:is|are)\s+now\s+(?P<v>{p})\b",
        rf"\b(?:was|were)\s+(?:successfully|now)\s+(?P<v>{p})\b",
        # "The fare difference was waived": a concession is no record's history, so the
        # plain passive reports it granted (not "the reservation was created").
        rf"\b(?:was|were)\s+(?:\w+\s+)?(?P<v>{concessions})\b",
        # "Upon reviewing the details again, ...", "after checking your account, ...".
        rf"\b(?:upon|after)(?:\s+(?:further|closer|careful|another))?\s+(?P<v>{g})\b",
        # "Successfully cancelled your reservation."
        rf"{_SENT}{_MARKS}successfully\s+(?P<v>{p})\b",
    ]
    # "I was able to cancel your order", "we managed to rebook you": done, in a base form.
    able = (rf"{_SUBJ}(?:\s+(?:was|were)(?:\s+(?:finally|successfully))?\s+able|"
            rf"(?:{_APOS}ve|\s+have)\s+been\s+able|\s+managed){_ADV}\s+to{_ADV}"
            rf"\s+(?P<v>{b})\b")
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
        # "Give me a moment to cancel that", "I'm in the process of cancelling it".
        rf"\b(?:give|allow)\s+me\s+(?:a|one|just\s+a)\s+(?:moment|second|minute|sec)\s+"
        rf"to{_ADV}\s+(?P<v>{b})\b",
        rf"{_SUBJ}(?:{_APOS}m|\s+am|\s+are|{_APOS}re){_ADV}\s+in\s+the\s+process\s+of\s+"
        rf"(?P<v>{g})\b",
        # "Updating your reservation now."
        rf"{_SENT}{_MARKS}(?P<v>{g})\b[^.!?\n]{{0,80}}\bnow\b",
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
    # "The cancellation went through", "your refund was successful": the work named by
    # its noun, reported done. Not "is confirmed": a record's status reads that way.
    finished = (rf"\b(?P<n>{nouns})(?:\s+request)?\s+(?:went\s+through|has\s+gone\s+through|"
                rf"was\s+successful|is\s+(?:now\s+)?complete|(?:has|have)\s+(?:now\s+|also\s+|"
                rf"already\s+)?been\s+(?:successfully\s+)?(?:completed|made|finalized|"
                rf"carried\s+out))\b")
    # "I've made the changes", "we completed the cancellation": the work named by its noun,
    # done by the reporter.
    made = (rf"{_SUBJ}(?:{_APOS}ve|\s+have|\s+had)?{_ADV}\s+(?:made|completed|finalized|"
            rf"carried\s+out)\s+(?:the\s+|your\s+|this\s+|that\s+|these\s+|those\s+|all\s+"
            rf"(?:the\s+)?)?(?:\w+\s+){{0,2}}?(?P<n>{nouns})\b")
    # A result credited to a lookup: "according to our records", "based on my search",
    # "my search shows", "looking at your order". The rules and the policy are in the
    # prompt, not behind a tool, so they are no source here.
    cited = [
        (r"\b(?:according\s+to|based\s+on|per)\s+(?:our|your|the|my)\s+"
         r"(?:(?:latest|current|updated)\s+)?(?P<v>records?|system|database|search|lookup|"
         r"account\s+(?:details|records?|information)|(?:order|reservation|booking|"
         r"account)\s+(?:details|history|records?))\b",
         ("according", "based on", "per "), ("according", "based", "per ")),
        (r"\b(?:my|the|our)\s+(?P<v>search|lookup|check)\s+(?:shows|showed|found|returned|"
         r"indicates|indicated|reveals|revealed|confirms|confirmed)\b",
         (r"\bsearch\b", r"\blookup\b", r"\bcheck\b"), ("my ", "the ", "our ")),
        (r"(?:^|(?<=[.!?]\s))looking\s+at\s+(?:your|the)\s+(?P<v>order|account|reservation|"
         r"booking|records?|profile|details)\b",
         ("looking at",), ("looking",)),
        # "I've confirmed that your line is active", "I can see that your order shipped",
        # "I see that the line ... is active": a record's state read off a lookup.
        (r"\b(?:i|we)(?:['’]ve|\s+have)\s+(?:now\s+|just\s+|also\s+)?(?P<v>confirmed)\s+"
         r"(?:that|the|your)\b",
         ("confirmed",), _SUBJECT_STARTS),
        # "Your account shows two lines", "our records indicate ...", "the system shows":
        # a record's state read off a lookup, credited to the record.
        (r"\b(?:(?:your|the|our)\s+(?:records?|system|database|account)|"
         r"(?:your|the|our)\s+(?:account|order|reservation|booking|payment)\s+"
         r"(?:details|history|records?|information)|your\s+(?:profile|details))\s+"
         r"(?:shows?|showed|indicates?|indicated|lists?|listed|reflects?|reflected)\b",
         (" show", "indicat", " list", "reflect"), ("your", "the", "our")),
        # "From what I can see in your account", "from what I see on your profile".
        (r"\bfrom\s+what\s+(?:i|we)\s+(?:can\s+)?(?P<v>see)\s+(?:in|on)\s+(?:your|the)\s+"
         r"(?:account|order|reservation|booking|records?|profile|system)\b",
         ("from what",), ("from",)),
        (r"\b(?:i|we)\s+(?:can\s+)?(?P<v>see)\s+(?:that\s+)?(?:your|the)\s+(?:current\s+)?"
         r"(?:order|account|reservation|booking|records?|profile|line|plan|subscription|"
         r"flight|payment|bill|data|membership)\b",
         (r"\bsee\b",), _SUBJECT_STARTS),
    ]
    # List items without a subject: "- **Checked bag:** 1 checked bag added",
    # "- Upgraded to business class", "✅ Order cancelled". Writes only: "checked bag" is
    # not a check.
    fragment = (rf"^[ \t]*(?:[-*•✅✔☑✓]\ufe0f?|\d+[.)])[ \t]*(?:\*\*[^*\n]{{1,40}}\*\*:?[ \t]*|"
                rf"[A-Za-z ]{{1,30}}:[ \t]*)?(?:[\w$.,#]+[ \t]+){{0,4}}?(?P<v>{p})\b"
                rf"(?=[ \t]*(?:[.!]?[ \t]*$|\(|to\b|with\b|for\b|on\b|in\b|from\b|successfully\b))")
    # A check mark before the verb reports it done whatever follows ("✅ Cancelled
    # reservation ABC123"); a bullet alone does not ("- Paid with Gift Card: $280").
    checked_first = (rf"^[ \t]*[✅✔☑✓]\ufe0f?[ \t]*(?:\*\*)?(?P<v>{p})\b"
                     r"(?![ \t]*(?:\*\*)?[ \t]*:)")
    # Each pattern with the words one of which its matches contain (a reply without any
    # of them skips the pattern: a substring test in C, against a regex scan), and the
    # literals its matches start with (the pattern is then tried only where one occurs,
    # found by str.find, instead of at every character; None: no such literal).
    subject = ("i ", "i'", "i’", "we ", "we'", "we’")
    starts_subject = _SUBJECT_STARTS
    # (words one of which the text must hold, how the match must start) per pattern.
    hints = tuple[tuple[tuple[str, ...], tuple[str, ...] | str | None], ...]
    done_hints: hints = ((subject, starts_subject),
                  (("been",), ("has", "have", "had", "'s", "’s")),
                  ((_NOW_WORD,), ("is", "are")), (("successfully", _NOW_WORD), ("was", "were")),
                  (tuple(f for v in CONCESSION_VERBS for f in past_forms(v)), ("was", "were")),
                  (("upon", "after"), ("upon", "after")), (("successfully",), SENTENCE_STARTS))
    now_hints: hints = ((("i'm", "i’m", "i am", "we are", "we're", "we’re"), starts_subject),
                 (("let",), ("let",)),
                 (("i'll", "i’ll", "will", "shall", "going", "about"), starts_subject),
                 (("while",), ("while",)),
                 ((r"\bme\b",), ("give", "allow")), (("process of",), starts_subject),
                 ((_NOW_WORD,), SENTENCE_STARTS))
    proceed_needs = ("proceed", "process", "complet", "finaliz", "initiat", "handl", "mak")
    subject_finder = re.compile(_SUBJECT_FINDER)
    work_starts: dict[str, Starts] = {"subject": starts_subject, "finder": subject_finder}
    out: list[tuple[re.Pattern[str], str, str, tuple[str, ...], Starts]]
    out = [(re.compile(x, flags), DONE, "ing" if "upon" in x else "past", needs, starts)
           for x, (needs, starts) in zip(done, done_hints, strict=True)]
    out += [(re.compile(x, flags), t, "work", needs, work_starts.get(starts, starts))
            for x, t, needs, starts in _WORK_PATTERNS]
    out.append((re.compile(fragment, flags), DONE, "fragment",
                ("-", "*", "•", ".", ")", "✅", "✔", "☑", "✓"), LINE_STARTS))
    out.append((re.compile(checked_first, flags), DONE, "fragment",
                ("✅", "✔", "☑", "✓"), LINE_STARTS))
    out.append((re.compile(able, flags), DONE, "able", (r"\bable\b", r"\bmanaged\b"),
                starts_subject))
    out += [(re.compile(x, flags), DONE, "cite", needs, starts) for x, needs, starts in cited]
    # The action nouns, case-sensitively: a start finder (a noun starts every match).
    out.append((re.compile(made, flags), DONE, "noun",
                (r"\bmade\b", "completed", "finalized", "carried out"), starts_subject))
    out.append((re.compile(finished, flags), DONE, "noun",
                ("went through", "gone through", "was successful", "complete", "been made",
                 "finalized", "carried out"),
                re.compile(nouns)))
    out += [(re.compile(x, flags), NOW, "now", needs, starts)
            for x, (needs, starts) in zip(now, now_hints, strict=True)]
    out += [(re.compile(proceed[0], flags), NOW, "noun", proceed_needs, starts_subject),
            (re.compile(proceed[1], flags), NOW, "noun", proceed_needs, ("let",))]
    return out


def lookup_verb(form: str, which: str) -> tuple[str, str] | None:
    """``(kind, lemma)`` of the verb (or action noun) a pattern of family ``which``
    matched, or None when it is no claim verb."""
    key = _norm(form)
    if which == "cite":
        return READ, "check"  # a result credited to a lookup claims the lookup
    if which == "work":
        # "I'm running the tests" claims a run, "I'm calling write_file" an invocation:
        # backed as runs are (see verbs.EXECUTE_VERBS), not by any write.
        word = key.split()[0]
        return WRITE, _WORK_LEMMAS.get(word, word)
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
