"""Loops: a reply that says again what an earlier reply said, with nothing new since.

Repeating words is not the failure; repeating without progress is. An agent that checks
reservation after reservation with the same sentence is working, and so is one that
re-sends its summary after a failed call and a new choice by the user. A loop is the same
refusal, request, error or answer again **with no new tool result since the earlier reply,
no new call in this one, and nothing new in it**:

1. *same substance*: the reply and an earlier one share most of their content words
   (lower-cased, simple endings cut, function and courtesy words dropped), measured in
   both directions so a short reply inside a long one is not a repeat of it. A sentence
   that only tells the user where to find what they were asked for ("you can find it in
   your confirmation email") is the request reworded, not substance. An offer to hand the
   user to a person, made again, is the same transfer notice however it is worded;
2. *nothing new*: no sentence of the reply is mostly new words (courtesy sentences such as
   "I understand your frustration", closings such as "if you need further assistance,
   let me know", pointers to where to find something and transfer offers do not count),
   and it states no value (id, amount, number) the earlier replies did not;
3. *no new way forward*: it offers no lookup and no transfer the earlier replies did not
   ("provide your user ID and I can look it up" after the user lost the reservation ID
   is progress, and so is the first "I can transfer you to a human agent");
4. *no new question answered*: a request for what a new ask of the user's needs ("to
   upgrade your seat I need your reservation ID") or an answer that takes up a new
   question of the user's is progress. The user insisting ("is there any other way?",
   "are you sure?") is not: a refusal reworded in the user's own words is the same
   refusal, and so is one said again almost word for word with the user's new verb
   swapped in.

A call is not progress, its result is: an agent that retries a failing update, gets the
same error and says the same thing again is looping (the detector judges a reply that
makes a call only when every call it makes was made before or the latest calls all
failed, and then asks for almost the same words: see ``conversation_guard``). A reply
that makes again, unchanged, the calls that just failed for good
(:func:`reports_failure`), with nothing from the user since, loops whatever it says: the
same error is all those calls can return. And a goodbye said again after the user's
thanks, naming nothing new, is the loop of an agent that cannot end a conversation,
however few content words it has.

Measured on 2,216 hand-labelled real replies (``benchmarks/detection_quality.py``), this
keeps about nine flags in ten right and finds about seven in ten labelled loops. Two
independent labelling passes of the same replies agreed on loops at about F1 0.69: the
boundary between "asking again" and "moving the conversation on" is a judgement people
split on too.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from .claims import sentences

__all__ = ["NEAR_VERBATIM", "LoopMatch", "content_words", "excerpt", "find_loop",
           "reports_failure", "substance_words"]

_WORD_RE = re.compile(r"[a-z][a-z']+|\d+")
# Values a reply can bring: ids, amounts, numbers. A value starts after no letter and no
# underscore (the lookbehind; the same matches): tried at every letter of a long run with
# no digit, the pattern would scan the rest of the run each time, quadratic in its length.
_VALUE_RE = re.compile(r"(?<![A-Za-z_])[A-Za-z0-9_]*\d[A-Za-z0-9_]*|\$\s?\d[\d,.]*")
# Sentences of courtesy carry no content, however new their words.
_COURTESY_RE = re.compile(
    r"\b(?:thank|thanks|sorry|apolog|understand|appreciate|welcome|glad|happy\s+to|great|"
    r"certainly|of\s+course|no\s+problem|frustrat|inconvenien|"
    # The closings every agent ends with: "if you need further assistance, let me know".
    r"let\s+me\s+know|feel\s+free|further\s+assistance|any\s+(?:other|more|further)\s+"
    r"(?:questions|concerns)|anything\s+else|reach\s+out|here\s+to\s+help)\w*",
    re.IGNORECASE)
# An offer to look something up: a way forward the user did not have.
_LOOKUP_OFFER_RE = re.compile(
    r"\b(?:i\s+can|i['’]ll|i\s+will|let\s+me|and\s+i\s+can|help\s+you)\s+"
    r"(?:help\s+you\s+)?(?:look\s+(?:up|for|into)|find|retrieve|locate|search|pull\s+up)\b",
    re.IGNORECASE)
# The goodbyes a conversation ends on. A reply of nothing but these, after another such
# reply with only the user's thanks between, is the goodbye said again: the loop of an
# agent that cannot end a conversation ("You're welcome! Have a great day!" "Thank you!
# Looking forward to assisting you. Have a wonderful day!").
_FAREWELL_RE = re.compile(
    r"\b(?:have\s+a\s+(?:great|wonderful|good|nice|fantastic|safe|lovely)|safe\s+travels"
    r"|take\s+care|talk\s+(?:to\s+you\s+)?soon|goodbye|bye|reach\s+out|feel\s+free"
    r"|i['’]ll\s+be\s+here|whenever\s+you['’]re\s+ready|don['’]t\s+hesitate"
    r"|looking\s+forward|take\s+your\s+time|get\s+well)", re.IGNORECASE)
_ACKNOWLEDGEMENT_RE = re.compile(
    r"\b(?:sounds\s+good|perfect|wonderful|excellent|alright|got\s+it|will\s+do|enjoy)\b",
    re.IGNORECASE)
# A pointer to where the user can find what they were asked for ("you can find it in your
# booking confirmation", "please check your email or any other place you might have stored
# it"): the request said again in other words, not a way forward (an offer to look it up
# is one: see _LOOKUP_OFFER_RE). Such a sentence is neither new nor the reply's substance.
_FIND_IT_RE = re.compile(
    r"\b(?:in|on|at|through|check)\s+(?:your|the|any|our)\s+(?:[a-z]+\s+){0,2}?"
    r"(?:e-?mails?|inbox|confirmations?|account|website|app|documents?|messages?|receipts?)\b",
    re.IGNORECASE)
# ... in a sentence about finding it: "the refund will reflect in your account" and "you
# have several lines on your account" point nowhere.
_FINDING_RE = re.compile(
    r"\b(?:find|found|locat\w*|look\w*|check\w*|search\w*|stored|listed|retriev\w*)\b",
    re.IGNORECASE)
# The offer to hand the user to a person: said again with nothing new since, it is the
# same transfer notice however it is worded ("I can transfer you to a human agent", "I
# recommend speaking with a human agent who may be able to assist", "I can connect you
# with a specialist", "I can escalate this to our support team").
_TRANSFER_RE = re.compile(
    r"\btransfer(?:ring)?\s+you\b|\bconnect(?:ing)?\s+you\s+(?:with|to)\b"
    r"|\bput(?:ting)?\s+you\s+in\s+touch\s+with\b|\bhand(?:ing)?\s+you\s+(?:over\s+)?to\b"
    r"|\bescalat(?:e|ing)\s+(?:this|it|your\s+(?:case|request|issue))\s+to\b"
    r"|\b(?:speak(?:ing)?\s+(?:with|to)|contact(?:ing)?"
    r"|reach(?:ing)?\s+out\s+to)\s+(?:a\s+)?(?:human|live)\s+(?:agent|representative)",
    re.IGNORECASE)
# A transfer bound to a condition of policy ("I can only transfer you if ...") offers none.
_ONLY_RE = re.compile(r"\bonly\b", re.IGNORECASE)
# A request for information, and a refusal: asking again for what a new request of the
# user needs ("to upgrade your seat, I'll need your reservation ID") answers that request;
# refusing it again is the loop itself.
_REQUEST_RE = re.compile(
    r"\b(?:could|can|would)\s+you\s+(?:please\s+)?(?:provide|share|give|tell|confirm|send)"
    r"|\bplease\s+(?:provide|share|send|confirm|let\s+me\s+know)"
    r"|\bi(?:['’]ll|\s+will)?\s+need\s+(?:your|the)\b"
    r"|\bonce\s+you\s+(?:have|provide|share|confirm)\b", re.IGNORECASE)
_REFUSAL_RE = re.compile(
    r"\b(?:unable|cannot|can['’]t|not\s+(?:able|possible|eligible|allowed|permitted)|"
    r"unfortunately|afraid|policy|transfer|human\s+agent)", re.IGNORECASE)
# A user insisting rather than bringing something new: "is there any other way", "are
# you sure", "can't you make an exception", "please try again".
_INSISTING_RE = re.compile(
    r"\b(?:any\s+(?:other\s+)?(?:way|option|chance|exception|workaround)s?|other\s+(?:way|option)s?"
    r"|are\s+you\s+(?:sure|certain)|(?:can['’]t|couldn['’]t|can\s+not|could\s+not)\s+you"
    r"|exceptions?|anyway|without\s+(?:it|them|that|one)|options?\s+to"
    r"|workarounds?|(?:try|check)\s+(?:it\s+)?again|one\s+more\s+time|still|really|"
    r"anything\s+(?:else\s+)?(?:you\s+can|that\s+can)|surely|please,?\s+i\s+(?:really\s+)?need)\b",
    re.IGNORECASE)
# Function words and courtesy words every reply shares: they say nothing about what the
# reply is about.
_STOPWORD_TEXT = """
a about above after again all also am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further
had has have having he her here hers herself him himself his how i i'd i'll i'm i've if in
into is it it's its itself just let let's me more most my myself no nor not now of off on
once only or other our ours ourselves out over own same she should so some such than that
that's the their theirs them themselves then there these they this those through to too
under until up very was we we'll we're we've were what when where which while who whom why
will with would you you'd you'll you're you've your yours yourself yourselves please thank
thanks sorry apologize apologies understand hello hi dear glad happy help assist
assistance feel free let know anything else further today again still however unfortunately
sure certainly absolutely great okay ok yes noted appreciate patience kindly regarding
"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
# A sentence counts as new when at least this share of its content words is new.
_NEW_SENTENCE_SHARE = 0.5
# At or above this share of content in common, a reply is the earlier one said again,
# almost word for word.
NEAR_VERBATIM = 0.9
_MIN_SENTENCE_WORDS = 3


@functools.lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    if word.endswith(("ies", "ied")) and len(word) > 4:
        return word[:-3] + "y"  # "policies", "applied": "policy", "apply"
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    # A silent final e goes too, so every form meets its base: "update", "updated" and
    # "updating" are "updat"; "certificate" and "certificates" are "certificat".
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


# Words every goodbye is made of, beside the phrases above (stemmed as content words are).
_CLOSING_TEXT = """
day welcome question future later soon ready whenever need hesitate wonderful fantastic
lovely nice assist assisting forward looking reach time take care safe travels don't
problem ask
"""
_CLOSING_WORDS = frozenset(_stem(w) for w in _CLOSING_TEXT.split())
# A goodbye may name what it waits for ("when you have the reservation ID") if that was
# said before; with more new words than this it says something else.
_MAX_NEW_CLOSING_WORDS = 1


def content_words(text: str) -> frozenset[str]:
    """The stemmed content words of ``text``."""
    # Distinct words first (set operations run in C), then stem only those.
    return frozenset(_stem(w) for w in set(_WORD_RE.findall(text.lower())) - _STOPWORDS
                     if len(w) > 1)


def _points_to_where(sentence: str) -> bool:
    return _FIND_IT_RE.search(sentence) is not None and _FINDING_RE.search(sentence) is not None


def _is_transfer_offer(sentence: str) -> bool:
    """Whether ``sentence`` offers to hand the user to a person, and does not bind that
    to a condition of policy ("I can only transfer you to a human agent if the request is
    beyond my scope" refuses one)."""
    return _TRANSFER_RE.search(sentence) is not None and _ONLY_RE.search(sentence) is None


def _offers_transfer(text: str) -> bool:
    """Whether a sentence of ``text`` offers a transfer (see `_is_transfer_offer`)."""
    if _TRANSFER_RE.search(text) is None:
        return False
    return any(_is_transfer_offer(sentence) for _, sentence in sentences(text))


def substance_words(text: str) -> frozenset[str]:
    """The content words of what ``text`` says: :func:`content_words` without the
    sentences that only point the user to where they can find something (those words,
    "email", "confirmation", "account", would make the same request said again look like
    another one)."""
    if _FIND_IT_RE.search(text) is None:
        return content_words(text)
    return content_words(" ".join(s for _, s in sentences(text) if not _points_to_where(s)))


# A tool result that reports a failure says so in its first line, where tools and runners
# put it ("Error: ...", "Speed test failed: ...", "introduced new syntax error(s)"); the
# rest of a result is data (a file that handles an exception, a log that mentions an
# error). "Completed with no errors" is no failure, nor is a first line of "Warning: ...".
_FAILURE_RE = re.compile(
    r"\b(?:errors?(?:\(s\))?|exception|fatal|failed|failure|not\s+found|no\s+such|denied|"
    r"invalid)\b", re.IGNORECASE)
# ... or it starts with a crash or an error object anywhere in its head.
_CRASH_RE = re.compile(r"Traceback \(most recent call last\)|[\"']error[\"']\s*:"
                       r"|[\"']success[\"']\s*:\s*false", re.IGNORECASE)
# The words without which neither finds anything: most results hold none, and a few
# substring tests cost less than a pattern tried at every position.
_FAILURE_WORDS = ("error", "exception", "traceback", "fatal", "fail", "found", "such",
                  "denied", "invalid", "success")
_NEGATED_RE = re.compile(r"\b(?:no|zero|0)\s$", re.IGNORECASE)
# ... and a failure that may pass by itself: retrying after it is no loop.
_TRANSIENT_RE = re.compile(
    r"time[ds]?\s*out|rate[\s_-]?limit|too\s+many\s+requests|\b(?:429|502|503|504)\b"
    r"|temporar|unavailable|try\s+again\s+later|overloaded|connection\s+(?:reset|refused)",
    re.IGNORECASE)
_FAILURE_HEAD_CHARS = 300


def _says_failed(head: str) -> bool:
    lowered = head.lower()
    if not any(word in lowered for word in _FAILURE_WORDS):
        return False
    if _CRASH_RE.search(head) is not None:
        return True
    first = head.lstrip().split("\n", 1)[0]
    if first[:7].lower() == "warning":
        return False
    # "no errors" and "0 errors" report none.
    return any(_NEGATED_RE.search(first, max(0, m.start() - 6), m.start()) is None
               for m in _FAILURE_RE.finditer(first))


def reports_failure(result: str, marked: bool = False) -> bool:
    """Whether a tool result says its call failed for good: it is ``marked`` as an error
    by its message (Anthropic's ``is_error``) or says so at its start, and it is not a
    timeout, a rate limit or a service briefly unavailable. The same call again can only
    fail again."""
    head = result[:_FAILURE_HEAD_CHARS]
    return (marked or _says_failed(head)) and _TRANSIENT_RE.search(head) is None


@dataclass(frozen=True, slots=True)
class LoopMatch:
    """The earlier reply this one repeats.

    Attributes:
        earlier_index: The earlier reply's message index.
        similarity: Share of content the two replies share (the smaller direction).
        excerpt: The start of the earlier reply.
    """

    earlier_index: int
    similarity: float
    excerpt: str


def excerpt(text: str, size: int = 80) -> str:
    """The start of ``text`` on one line, as loop evidence shows it."""
    flat = " ".join(text.split())
    return flat if len(flat) <= size else flat[: size - 1] + "…"


def _courteous(sentence: str) -> bool:
    """Courtesy or a farewell: words that carry no content, however new."""
    return bool(_COURTESY_RE.search(sentence) or _FAREWELL_RE.search(sentence))


def _says_something_new(reply: str, said: frozenset[str], said_values: set[str]) -> bool:
    if set(_VALUE_RE.findall(reply)) - said_values:
        return True
    for _, sentence in sentences(reply):
        words = content_words(sentence)
        if (len(words) < _MIN_SENTENCE_WORDS or _courteous(sentence)
                or _points_to_where(sentence) or _is_transfer_offer(sentence)):
            continue
        if len(words - said) >= _NEW_SENTENCE_SHARE * len(words):
            return True
    return False


def _is_goodbye(text: str) -> bool:
    """Whether ``text`` is a goodbye and nothing else: a farewell, and every sentence
    courtesy, farewell, acknowledgement or a word or two."""
    if not _FAREWELL_RE.search(text):
        return False
    return all(_courteous(sentence) or _ACKNOWLEDGEMENT_RE.search(sentence)
               or len(content_words(sentence)) < 2 for _, sentence in sentences(text))


def _repeated_goodbye(reply: str, words: frozenset[str],
                      earlier: Sequence[tuple[int, str, frozenset[str] | None]],
                      user_said: str) -> LoopMatch | None:
    """The goodbye ``reply`` says again, if it is one: the latest earlier reply was a
    goodbye too, the user only answered it (no question), and the reply names nothing
    new beyond a word."""
    if not user_said or "?" in user_said:
        return None  # unknown, or the user asked something: answering it is progress
    index, last, _ = earlier[-1]
    if not (_is_goodbye(reply) and _is_goodbye(last)):
        return None
    said: set[str] = set(content_words(user_said))
    said_values: set[str] = set()
    for _, text, known in earlier:
        said |= substance_words(text) if known is None else known
        said_values.update(_VALUE_RE.findall(text))
    if set(_VALUE_RE.findall(reply)) - said_values:
        return None
    if len(words - said - _CLOSING_WORDS) > _MAX_NEW_CLOSING_WORDS:
        return None
    mine, theirs = set(_WORD_RE.findall(reply.lower())), set(_WORD_RE.findall(last.lower()))
    shared = len(mine & theirs)
    # The evidence says which rule matched: a goodbye shares few words with another.
    return LoopMatch(index, min(shared / len(mine), shared / len(theirs)),
                     "the same goodbye again: " + excerpt(last))


def _same_transfer(scored: Sequence[tuple[int, str, float]]) -> LoopMatch | None:
    """The latest earlier reply that offered a transfer too, if any (``scored``: each
    earlier reply's index, text and share of content in common with this one)."""
    for index, text, score in reversed(scored):
        if _offers_transfer(text):
            return LoopMatch(index, score, "the same transfer offer again: " + excerpt(text))
    return None


def find_loop(reply: str, earlier: Sequence[tuple[int, str, frozenset[str] | None]], *,
              threshold: float, min_words: int,
              reply_words: frozenset[str] | None = None,
              user_said: str = "") -> LoopMatch | None:
    """The earlier reply ``reply`` repeats without progress, if any.

    Args:
        reply: The reply to judge.
        earlier: ``(message index, text, substance words or None)`` of the earlier replies
            it may repeat: those with no new tool result between them and ``reply``,
            oldest first.
        threshold: Least share of content the reply and an earlier one must share, in
            both directions.
        min_words: Replies with fewer content words never loop ("Thanks!").
        reply_words: ``substance_words(reply)`` when already computed.
        user_said: What the user said since the latest earlier reply ("" when unknown):
            a request that takes it up answers something new.

    Returns:
        The most similar earlier reply at or above the threshold (or, below it, the
        latest earlier reply that offered a transfer when this one offers one too), if
        the reply says nothing new; else None.
    """
    if not earlier:
        return None
    words = substance_words(reply) if reply_words is None else reply_words
    goodbye = _repeated_goodbye(reply, words, earlier, user_said)
    if goodbye is not None:
        return goodbye
    if len(words) < min_words:
        return None
    best: LoopMatch | None = None
    said: set[str] = set()
    said_values: set[str] = set()
    scored: list[tuple[int, str, float]] = []
    for index, text, known in earlier:
        other = substance_words(text) if known is None else known
        said |= other
        said_values.update(_VALUE_RE.findall(text))
        shared = len(words & other)
        score = min(shared / len(words), shared / len(other)) if other else 0.0
        scored.append((index, text, score))
        if other and score >= threshold and (best is None or score > best.similarity):
            best = LoopMatch(index, score, excerpt(text))
    offers_transfer = _offers_transfer(reply)
    if best is None and offers_transfer:
        best = _same_transfer(scored)
    if best is None:
        return None
    user_words = content_words(user_said) if user_said else frozenset()
    insisted = bool(user_said) and _INSISTING_RE.search(user_said) is not None
    refusal = _REFUSAL_RE.search(reply) is not None
    # The user insisting is not progress: a refusal that echoes the insistence ("no
    # exception or workaround") says nothing new. New facts of the user's are answered.
    echoed = user_words if insisted and refusal else frozenset()
    if _says_something_new(reply, frozenset(said) | echoed, said_values):
        return None
    # A new way forward: a lookup, or a person to take it on.
    if _LOOKUP_OFFER_RE.search(reply) and not any(
            _LOOKUP_OFFER_RE.search(text) for _, text, _ in earlier):
        return None
    if offers_transfer and not any(_offers_transfer(text) for _, text, _ in earlier):
        return None
    # A reply all but word for word the earlier one answers nothing new, whatever word of
    # the user's it picks up.
    takes_up_user = bool((words - said) & user_words) and best.similarity < NEAR_VERBATIM
    if takes_up_user and _REQUEST_RE.search(reply) and not refusal:
        return None  # a request for what the user's new request needs
    # The user asked something new (not insisting) and the reply takes it up: an answer
    # to a new question, however like the last one ("unable to give your gift card
    # balance", then "... your certificate balance").
    if takes_up_user and not insisted and "?" in user_said:
        return None
    return best
