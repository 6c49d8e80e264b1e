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

Each claim pattern (:mod:`~guardtrace.collectors.replies.claim_patterns`) runs once over
the whole reply (tried only where its start literal occurs, and skipped when a word it
needs is absent), with bounded repetition; a match is then
judged within its sentence, in windows of bounded size. The cost is linear in the reply.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import re
from dataclasses import dataclass

from .candidate_patterns import EVERY, CandidateWords
from .claim_patterns import (
    CLAUSE_STARTS,
    DONE,
    LINE_STARTS,
    NOW,
    SENTENCE_STARTS,
    Starts,
    claim_patterns,
    lookup_verb,
)
from .verbs import READ, WRITE

__all__ = ["DONE", "NOW", "Claim", "find_claims", "mask_quoted", "sentences"]

# Characters around a claim that decide what it is (a negation before it, an object or a
# colon after it), and the most claims one reply is read for.
_WINDOW = 200
_MAX_CLAIMS = 256

# Words that make a sentence an offer, a condition or a question to the user: a claim
# of work that waits for someone else.
_CONDITIONAL_RE = re.compile(
    r"\b(?:if\s+(?:you|your|u|it['’]?s|it\s+is|that|this|so|needed|necessary|possible|"
    r"required|desired|preferred|applicable|everything|all|there['’]?s|we|i)\b|"
    r"once\s+(?!more\b)|unless|whenever|when\s+you|after\s+you|as\s+soon\s+as|upon|pending|"
    r"before\s+(?:i|we)\b|would\s+you|do\s+you\s+want|shall\s+i|should\s+i|can\s+i|"
    r"could\s+i|may\s+i|want\s+me|like\s+me\s+to|let\s+me\s+know|please\s+confirm|"
    r"(?<!\bto\s)confirm\s+(?:if|whether|that|the|your|you)|your\s+confirmation|can\s+(?:also\s+)?"
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
# Words without which no request pattern can match a sentence: most sentences have none,
# and a substring test is far cheaper than the pattern's search.
_REQUEST_HINT_RE = re.compile(r"please|kindly|let|confirm|reply|if|once|when|after|soon")


def _asks(sentence: str) -> bool:
    """Whether a sentence asks the user something or asks them to act."""
    if sentence.rstrip().endswith("?"):
        return True
    return bool(_REQUEST_HINT_RE.search(sentence.lower()) and _REQUEST_RE.search(sentence))


_NEGATION_RE = re.compile(r"\b(?:not|never|no\s+longer|cannot|can['’]t|couldn['’]t|"
                          r"won['’]t|didn['’]t|haven['’]t|hasn['’]t|wasn['’]t|"
                          r"weren['’]t|isn['’]t|aren['’]t|don['’]t|doesn['’]t|unable)\b",
                          re.IGNORECASE)
# "to ensure the data has been applied", "glad to hear roaming is now enabled": the
# sentence is about checking or hearing of a state, not a report of the agent's work.
_EMBEDDED_RE = re.compile(r"\b(?:ensure|make\s+sure|verify|confirm|check|see|whether|if|"
                          r"glad|happy|hear|hope|seems?|appears?|looks?\s+like|sounds?\s+"
                          r"like|noted|understand)\b", re.IGNORECASE)
# "after the booking has been completed": a clause of time or condition around a
# finished-work noun says when, not that it happened.
_SUBORDINATE_RE = re.compile(r"\b(?:after|before|once|until|when|whenever|unless|since|if)"
                             r"\s+(?:(?:the|your|a|an|this|that|my|our)\s+)?$", re.IGNORECASE)
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
        joined: For two verbs joined by "and" ("check and enable"), where the first
            starts in the reply, on both claims; -1 otherwise.
    """

    kind: str
    time: str
    verb: str
    phrase: str
    sentence: str
    fresh: bool = False
    joined: int = -1


# "your last", "the", "this earlier": what may come before a part of the conversation.
_CONVERSATION_PART = (r"\s+(?:(?:your|this|the|that|my)\s+)?"
                      r"(?:(?:last|previous|earlier|original)\s+)?")
# What follows the verb can show the words are not a claim of tool work:
_AFTER_NOT_CLAIM_RE = re.compile(
    # figurative ("building on your idea"), "checking in", interpretation ("reading this
    # as a request"), the conversation itself as the object ("read your message").
    r"\s+on\s+(?:your|that|this|what|top\s+of)\b"
    r"|\s+in\b(?!\s+(?:the|your|our|my|to)\b)"
    r"|\s+(?:(?:this|that|it|you|your\s+\w+|the\s+\w+)\s+)?as\b(?!\s+(?:requested|asked|"
    r"discussed|agreed|instructed|planned|promised|confirmed|you\s+(?:asked|requested)))"
    rf"|{_CONVERSATION_PART}(?:question|reply|comment|prompt|feedback|point|answer|words)\b"
    r"|\s+(?:what|how|why|whether)\s+(?:you|we)\b",
    re.IGNORECASE)
# Reading "your message" or "the request" is reading the conversation; submitting,
# processing or forwarding a request is work in the world ("I've submitted the request").
_AFTER_CONVERSATION_RE = re.compile(rf"{_CONVERSATION_PART}(?:message|request)\b",
                                    re.IGNORECASE)
# A second verb joined to a claim's: "let me check and update", "I'll look up and cancel".
_AND_VERB_RE = re.compile(r"\s+(?:it\s+|that\s+|this\s+|them\s+)?(?:up\s+)?and\s+(?:then\s+)?"
                          r"([a-z]+)\b", re.IGNORECASE)
# A done verb coordinated with a reported one, later in its sentence: "I fixed the bug
# and ran the test suite", "has been cancelled and refunded". The verb must follow "and"
# directly: a new subject ("and you can run") or a denial ("and have not run") is not
# the reporter's own work done.
_AND_DONE_RE = re.compile(r"(?:,\s*|\s+)and\s+(?:then\s+|also\s+|successfully\s+)?"
                          r"([a-z]+)\b", re.IGNORECASE)
# Idioms of "run" that are no run: "I've run into a problem", "I'll run it by you",
# "we ran out of seats", "running low".
_RUN_IDIOM_RE = re.compile(
    r"\s+(?:(?:it|this|that|them)\s+)?(?:into|by|across|out|low|short|late|over|away|off)\b",
    re.IGNORECASE)
# Content that is in this reply: "I've rewritten the function below".
_INLINE_RE = re.compile(r"\b(?:below|above|the\s+following|in\s+this\s+(?:reply|message|"
                        r"answer|response))\b", re.IGNORECASE)

# Regions whose words are quoted, not said: fenced code, inline code, double-quoted spans
# on one line, blockquote lines, and guard disclaimers appended to a reply earlier.
# A name in code marks (`app.py`, no whitespace inside) is taken whole and kept (see
# `_blank`): its closing mark must not open a quote that blanks the words after it.
# Linear time: inline code is a backtick, a run up to the next backtick holding some
# whitespace (one line break at most), and a backtick; the whitespace is found by a
# lookahead that stops at the next backtick, and the runs are possessive, so a backtick
# without a partner costs its own run once (``[^`\n]*\s[^`\n]*`` retried every split of
# the run: quadratic). A curly quote runs to the next curly quote of either kind, so an
# unclosed one cannot make every later one on the line rescan it.
_QUOTED_RE = re.compile(
    r"```.*?(?:```|\Z)|`[^`\s]*+`|`(?=[^`\n]*?\s)[^`\n]*+(?:\n[^`\n]*+)?`|\"[^\"\n]*+\""
    r"|“[^“”\n]*+”|^[ \t]*>[^\n]*|^⚠️[^\n]*",
    re.DOTALL | re.MULTILINE)
# A sentence ends at . ! ? or a line break; a dot inside a number or a name ("$1.5",
# "app.py") does not end it.
# Runs of ordinary characters are taken whole (possessively), not one character per step
# of an alternation: the same sentences, several times faster.
_SENTENCE_END_RE = re.compile(r"[.!?\n]")
_LINE_END_RE = re.compile(r"\n")
_SENTENCE_RE = re.compile(r"(?:[^.!?\n]++|\.(?=\w))++[.!?]*+")


def mask_quoted(text: str) -> str:
    """``text`` with quoted regions blanked (same length, so offsets still hold)."""
    if not any(c in text for c in '`"“>⚠'):
        return text
    return _QUOTED_RE.sub(_blank, text)


def _blank(match: re.Match[str]) -> str:
    quoted = match.group()
    if quoted[0] == "`" and not quoted.startswith("```") and not any(
            c.isspace() for c in quoted):
        return quoted  # a name in code marks is part of the sentence
    return " " * len(quoted)


def sentences(text: str) -> list[tuple[int, str]]:
    """``(offset, sentence)`` pairs of ``text``; blank ones dropped."""
    return [(m.start(), m.group()) for m in _SENTENCE_RE.finditer(text) if m.group().strip()]


_CHECK_MARKS = "✅✔☑✓"
# Participles that name a record's state in a listing ("Payment: paid with a gift card",
# "Status: booked"), not work just done.
_STATUS_VERBS = frozenset({"pay", "book", "reserve", "schedule", "charge", "create",
                           "register", "subscribe", "set", "place", "issue", "close",
                           "lock", "block", "suspend", "enable", "disable", "cancel"})


# Characters that a case-insensitive pattern takes for a letter but that lower-case to
# themselves: "ı" is "i" to it, "ſ" is "s" (tests/unit pins that there are no others).
_UNLOWERED_LETTERS = ("ı", "ſ")


def _start_positions(text: str, lowered: str | None, starts: Starts,
                     plain: str | None = None) -> list[int] | None:
    """Where a pattern's matches can start, in order: where a start literal occurs
    (found in ``lowered``), where a start finder matches ``plain``, or at sentence,
    clause or line starts; None when anywhere (or when the text they need is None)."""
    if isinstance(starts, re.Pattern):
        return None if plain is None else [m.start() for m in starts.finditer(plain)]
    if starts in (SENTENCE_STARTS, CLAUSE_STARTS):
        positions = {0}
        for m in _SENTENCE_END_RE.finditer(text):
            positions.add(m.end())
            if text.startswith(" ", m.end()) and m.group() != "\n":
                positions.add(m.end() + 1)
        if starts == CLAUSE_STARTS:  # also after ", " and "; "
            for mark in (", ", "; "):
                at = text.find(mark)
                while at >= 0:
                    positions.add(at + len(mark))
                    at = text.find(mark, at + 1)
    elif starts == LINE_STARTS:
        positions = {0, *(m.end() for m in _LINE_END_RE.finditer(text))}
    elif starts is None or lowered is None or isinstance(starts, str):
        return None
    else:
        positions = set()
        for literal in starts:
            at = lowered.find(literal)
            while at >= 0:
                positions.add(at)
                at = lowered.find(literal, at + 1)
    return sorted(positions)


def _matches(pattern: re.Pattern[str], text: str,
             positions: list[int] | None) -> list[re.Match[str]]:
    """``pattern.finditer(text)``, tried only at ``positions`` (see `_start_positions`):
    the same matches, found in C."""
    if positions is None:
        return list(pattern.finditer(text))
    out: list[re.Match[str]] = []
    end = 0
    for at in positions:
        if at < end:
            continue  # finditer semantics: matches do not overlap
        match = pattern.match(text, at)  # sees the characters before `at` for \b
        if match is not None and match.end() > at:
            out.append(match)
            end = match.end()
    return out


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"  # what \w matches


def _holds_whole_word(text: str, word: str) -> bool:
    """Whether ``word`` occurs in ``text`` with no word character either side.

    Lower-casing turns no other character into a word character, so a whole word of the
    reply stays one in its lower-cased text."""
    at = text.find(word)
    while at >= 0:
        end = at + len(word)
        if ((at == 0 or not _is_word_char(text[at - 1]))
                and (end == len(text) or not _is_word_char(text[end]))):
            return True
        at = text.find(word, at + 1)
    return False


class _Reading:
    """One reply as the claim patterns read it. Each reading is done once, and only when
    first needed: most replies hold no claim, and most of their sentences are never
    asked about."""

    __slots__ = ("text", "_lower", "_plain", "_flat", "_present", "_positions", "_parts",
                 "_starts", "_asks", "_last_ask")

    def __init__(self, text: str) -> None:
        self.text = text
        lower = text.lower()
        # A few characters lower-case to two: offsets into the lower-cased text would
        # drift, so start literals are then not looked for.
        self._lower = lower if len(lower) == len(text) else None
        # Start finders match the lower-cased text case-sensitively: the same starts as
        # the patterns' case-insensitive letters when every letter they take lower-cases
        # to the one they name.
        self._plain = (self._lower if self._lower is not None and not any(
            letter in text for letter in _UNLOWERED_LETTERS) else None)
        self._flat: str | None = None  # built when first needed (see holds_any)
        self._present: dict[str, bool] = {}
        self._positions: dict[Starts, list[int] | None] = {}
        self._parts: list[tuple[int, str]] | None = None
        self._starts: list[int] = []
        self._asks: dict[int, bool] = {}
        self._last_ask: int | None = None

    def holds_any(self, words: tuple[str, ...]) -> bool:
        """Whether one of ``words`` occurs in the reply (lower-cased, spaces collapsed),
        as a whole word if written between "\\b"s; several patterns need the same words,
        and each is looked for once."""
        present = self._present
        flat = self._flat
        if flat is None:
            flat = self._flat = " ".join(self.text.lower().split())  # "I  am" is "i am"
        for word in words:
            found = present.get(word)
            if found is None:
                if word[0] != "\\":
                    found = word in flat
                elif self._plain is not None:
                    found = _holds_whole_word(flat, word[2:-2])
                else:
                    # "ſearch" is "search" to a case-insensitive pattern, but not to the
                    # lower-cased text: any occurrence, as for other words.
                    found = word[2:-2] in flat
                present[word] = found
            if found:
                return True
        return False

    def matches(self, pattern: re.Pattern[str], starts: Starts) -> list[re.Match[str]]:
        """``pattern``'s matches; the start positions are shared by the patterns with the
        same starts."""
        if starts not in self._positions:
            self._positions[starts] = _start_positions(self.text, self._lower, starts,
                                                       self._plain)
        return _matches(pattern, self.text, self._positions[starts])

    def parts(self) -> list[tuple[int, str]]:
        """The reply's sentences, ``(offset, sentence)``."""
        if self._parts is None:
            self._parts = sentences(self.text)
            self._starts = [offset for offset, _ in self._parts]
        return self._parts

    def sentence_at(self, position: int) -> int:
        """The index of the sentence that holds ``position`` (-1: before the first)."""
        self.parts()
        return bisect.bisect_right(self._starts, position) - 1

    def asks(self, i: int) -> bool:
        """Whether sentence ``i`` asks the user something or asks them to act."""
        found = self._asks.get(i)
        if found is None:
            found = self._asks[i] = _asks(self.parts()[i][1])
        return found

    def question_after(self, i: int) -> bool:
        """Whether a sentence after sentence ``i`` asks the user something."""
        if self._last_ask is None:
            # The last asking sentence, looked for from the end (replies end with their
            # questions): later than ``i`` is the same as any after it asking.
            last = len(self.parts()) - 1
            while last >= 0 and not self.asks(last):
                last -= 1
            self._last_ask = last
        return self._last_ask > i


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


def _add_coordinated(claims: list[Claim], spans: list[tuple[int, int]], after: str,
                     at: int, context: str, fresh: bool) -> None:
    """The done verbs coordinated with the claim just found (see `_AND_DONE_RE`), each a
    claim of its own in the same words (``context``, ``fresh``); ``after`` is the rest of
    its sentence (a bounded window), starting at offset ``at`` of the reply."""
    for m in _AND_DONE_RE.finditer(after):
        found = lookup_verb(m.group(1), "past")
        if found is None or len(claims) >= _MAX_CLAIMS:
            continue
        start = at + m.start(1)
        spans.append((start, start + len(m.group(1))))
        claims.append(Claim(kind=found[0], time=DONE, verb=found[1],
                            phrase=" ".join(m.group(0).lstrip(",").split()), sentence=context,
                            fresh=fresh))


@functools.cache
def _claim_words() -> CandidateWords:
    """Which of the words the claim patterns need occur in a reply, found in one pass
    (built on first use)."""
    return CandidateWords(sorted({word for *_, needs, _ in claim_patterns()
                                  for word in needs}))


def find_claims(reply: str) -> list[Claim]:
    """The claims of tool work in ``reply``, in order.

    Args:
        reply: The assistant's text.

    Returns:
        Claims that a tool must back: completed ones, and ones happening now that are
        not offers, conditions on the user, or plans followed by a question.
    """
    reading = _Reading(mask_quoted(reply))
    claims: list[Claim] = []
    claim_spans: list[tuple[int, int]] = []
    lowered_parts: dict[int, str] = {}
    conditional: dict[int, bool] = {}
    # Each pattern runs once over the whole reply (a scan per sentence would cost a call
    # per sentence and pattern), and only if a word it needs occurs (found for all
    # patterns in one pass, or by a substring test per word); a match is then judged
    # within its sentence.
    present = _claim_words().which(reading.text)
    for pattern, time, which, needs, hints in claim_patterns():
        if present is EVERY:
            if not reading.holds_any(needs):
                continue
        elif not any(word in present for word in needs):
            continue
        for whole in reading.matches(pattern, hints):
            i = reading.sentence_at(whole.start())
            if i < 0:
                continue
            offset, sentence = reading.parts()[i]
            if whole.end() > offset + len(sentence):
                continue  # the match runs into the next sentence
            # A question or a request to the user claims nothing, and a plan followed by
            # one waits for the user.
            if reading.asks(i) or len(claims) >= _MAX_CLAIMS:
                continue
            lowered = lowered_parts.get(i)
            if lowered is None:
                lowered = lowered_parts[i] = sentence.lower()
            match = _Relative(whole, offset, sentence)
            form = (match.group("n") if which == "noun" else
                    whole.group(0) if which == "cite" else match.group("v"))
            found = lookup_verb(form, which)
            if found is None:
                continue
            kind, verb = found
            if which == "ing" and kind == WRITE:
                continue  # "after enabling roaming, ..." is often the user's doing
            # A check mark reports work done ("✅ Order cancelled"); a bare list item
            # with a status participle may only describe a record.
            checked = which == "fragment" and match.group().lstrip()[:1] in _CHECK_MARKS
            if which == "fragment" and (kind != WRITE or (verb in _STATUS_VERBS
                                                          and not checked)
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
            if _AFTER_NOT_CLAIM_RE.match(after) or _INLINE_RE.search(after) or (
                    kind == READ and _AFTER_CONVERSATION_RE.match(after)):
                continue
            if verb in ("run", "rerun") and _RUN_IDIOM_RE.match(after):
                continue
            if time == DONE and which == "past" and not re.match(
                    r"\s*(?:i|we)\b", match.group(), re.IGNORECASE) and \
                    _EMBEDDED_RE.search(before):
                continue
            if which == "noun" and time == DONE and _SUBORDINATE_RE.search(before):
                continue
            if kind == READ and _NO_TOOL_READ_RE.search(
                    lowered[match.start():match.end() + _WINDOW]):
                continue
            if time == NOW:
                if i not in conditional:
                    conditional[i] = bool(_CONDITIONAL_RE.search(lowered))
                if conditional[i] or ":" in after or reading.question_after(i):
                    continue
            claim_spans.append((offset + match.start(), offset + match.end()))
            # The claim's own words: its sentence, or a window of a very long one.
            context = lowered[max(0, match.start() - _WINDOW):match.end() + _WINDOW]
            claims.append(Claim(kind=kind, time=time, verb=verb,
                                phrase=" ".join(match.group().split()), sentence=context,
                                fresh=bool(_FRESH_RE.search(context))))
            if time == DONE and which == "past":
                _add_coordinated(claims, claim_spans, after, offset + match.end(), context,
                                 claims[-1].fresh)
            # "I'll check and enable it now": the verb after "and" is a claim of its own.
            second = _AND_VERB_RE.match(after) if time == NOW else None
            found_second = lookup_verb(second.group(1), "now") if second else None
            if second and found_second is not None and len(claims) < _MAX_CLAIMS:
                first = offset + match.start()
                claims[-1] = dataclasses.replace(claims[-1], joined=first)
                start = offset + match.end() + second.start(1)
                claim_spans.append((start, start + len(second.group(1))))
                claims.append(Claim(kind=found_second[0], time=time, verb=found_second[1],
                                    phrase=second.group(0).strip(), sentence=context,
                                    fresh=claims[-1].fresh, joined=first))
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
