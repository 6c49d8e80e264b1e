"""The story of a fabricated reply: the reply with each sentence the guard flagged marked,
its tier and the evidence.

Read from a ``fabrication_detection`` payload (the reply as judged, each tier's matched
phrase, the tools that fired) and the ``llm.fabrication_detected`` events (``tier``,
``matched_phrase``, ``found_in``); a finding with no payload (one the pipeline made in an
LLM span's telemetry) takes its reply from that span's exchange.

A phrase marks the sentence it is in; ``repetition`` marks the whole reply, which as a
whole repeats an earlier one (its evidence is a preview of that earlier reply). A phrase
no longer in the reply as stored (redaction may have changed it) is listed, not placed.

Pure and total, like :mod:`.exchange`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from guardtrace.dashboard.views.event_values import event_list, found_in
from guardtrace.dashboard.views.exchange import Conversation
from guardtrace.schemas import names
from guardtrace.store.queries import Payload, TraceEvent

__all__ = ["FabricationStory", "Mark", "Segment", "fabrication_stories", "mark_reply", "place"]

# What ends a sentence, when whitespace (or the end) follows it: "4431.63" and "15:40"
# stay whole. A line break always ends one.
_SENTENCE_ENDS: Final = frozenset(".!?…")
# A preview the guard cut ends with this; the phrase is searched for without it.
_PREVIEW_CUT: Final = "…"


@dataclass(frozen=True)
class Mark:
    """One finding in a reply.

    Attributes:
        tier: The fabrication tier (``action``, ``read``, ``repetition``, ...).
        evidence: The matched phrase (for ``repetition``, the earlier reply's preview).
        start: Where the marked sentence starts in the reply; -1 when not placed.
        end: Where it ends (exclusive); -1 when not placed.
    """

    tier: str
    evidence: str
    start: int = -1
    end: int = -1

    @property
    def placed(self) -> bool:
        return self.start >= 0


@dataclass(frozen=True)
class Segment:
    """A piece of the reply, and the marks on it (none for unmarked text)."""

    text: str
    marks: tuple[Mark, ...] = ()


@dataclass(frozen=True)
class FabricationStory:
    """One reply the guard flagged.

    Attributes:
        reply: The reply as judged; None when it is not stored.
        marks: Its findings, placed where their phrase is.
        tools_fired: The tools that ran for it; None when not recorded.
        similarity: For ``repetition``, how close it is to the earlier reply ("" if none).
        found_in: ``agent`` or ``pipeline``.
    """

    reply: str | None
    marks: tuple[Mark, ...]
    tools_fired: tuple[str, ...] | None = None
    similarity: str = ""
    found_in: str = names.FOUND_IN_AGENT

    def segments(self) -> tuple[Segment, ...]:
        """The reply cut into unmarked and marked pieces, in order (see :func:`mark_reply`)."""
        return mark_reply(self.reply or "", self.marks)


def mark_reply(reply: str, marks: Sequence[Mark]) -> tuple[Segment, ...]:
    """``reply`` cut at its placed marks: overlapping marks share one marked segment."""
    spans = sorted(((m.start, m.end, m) for m in marks if m.placed and m.end <= len(reply)),
                   key=lambda span: span[:2])
    segments: list[Segment] = []
    position = 0
    index = 0
    while index < len(spans):
        start, end, _ = spans[index]
        group = [spans[index][2]]
        index += 1
        while index < len(spans) and spans[index][0] < end:
            end = max(end, spans[index][1])
            group.append(spans[index][2])
            index += 1
        start = max(start, position)
        if start > position:
            segments.append(Segment(reply[position:start]))
        segments.append(Segment(reply[start:end], tuple(group)))
        position = end
    if position < len(reply):
        segments.append(Segment(reply[position:]))
    return tuple(segments)


def place(reply: str, tier: str, evidence: str) -> Mark:
    """A mark on the sentence of ``reply`` that holds ``evidence`` (all of it for
    ``repetition``), unplaced when the phrase is not in it."""
    if tier == names.TIER_REPETITION:
        return Mark(tier, evidence, 0, len(reply)) if reply else Mark(tier, evidence)
    # The first of its phrases found in the reply places the mark ("I've booked; and
    # emailed" is two claims; a cut preview may have lost the last).
    for phrase in evidence.removesuffix(_PREVIEW_CUT).split(names.EVIDENCE_SEPARATOR):
        for words in _as_written(phrase.strip()):
            at = _find(reply, words)
            if at >= 0:
                start, end = _sentence(reply, at, at + len(words))
                return Mark(tier, evidence, start, end)
    return Mark(tier, evidence)


def _as_written(phrase: str) -> list[str]:
    """``phrase``, then the words of it the reply wrote: an invented value's note goes
    ("$809.25 (calculated from a number no source gave)" was "$809.25" in the reply), and
    so does a field's name ("cabin: business (result: economy)" was "business")."""
    out = [phrase]
    head = phrase.split(" (", 1)[0].strip()
    if head != phrase:
        out.append(head)
    if ": " in head:
        out.append(head.split(": ", 1)[1].strip())
    return out


def _find(reply: str, phrase: str) -> int:
    """Where ``phrase`` is in ``reply``, as written or in other case; -1 if nowhere."""
    if not phrase:
        return -1
    at = reply.find(phrase)
    if at < 0:
        lowered = reply.lower()
        if len(lowered) == len(reply):  # same offsets: no character changed length
            at = lowered.find(phrase.lower())
    return at


def _sentence(text: str, start: int, end: int) -> tuple[int, int]:
    """The bounds of the sentence around ``text[start:end]``; linear in the text."""
    begin = start
    while begin > 0:
        before = text[begin - 1]
        if before == "\n" or (before in _SENTENCE_ENDS and text[begin].isspace()):
            break
        begin -= 1
    while begin < start and text[begin].isspace():
        begin += 1
    finish = max(end, begin)
    while finish < len(text):
        char = text[finish]
        if char == "\n":
            break
        finish += 1
        if char in _SENTENCE_ENDS and (finish == len(text) or text[finish].isspace()):
            break
    return begin, finish


def fabrication_stories(events: Sequence[TraceEvent], payloads: Sequence[Payload],
                        span_conversations: Mapping[str, Conversation],
                        ) -> tuple[tuple[FabricationStory, ...], tuple[tuple[Payload, str], ...]]:
    """Every flagged reply of one request, oldest first, and the payloads that could not
    be read, with why.

    Args:
        events: The request's span events, in time order.
        payloads: Its debug payloads, in time order.
        span_conversations: The exchange of each LLM span that has a readable one, by
            span id (the reply of a finding the pipeline made).
    """
    detected = [e for e in events if e.name == names.EVENT_FABRICATION_DETECTED]
    covered: set[str] = set()
    stories: list[FabricationStory] = []
    unread: list[tuple[Payload, str]] = []
    for payload in payloads:
        if payload.kind != names.PAYLOAD_KIND_FABRICATION:
            continue
        try:
            body = json.loads(payload.body)
        except (ValueError, RecursionError):
            unread.append((payload, "The body is not valid JSON (a body cut at the "
                                    "collector's payload limit is not)."))
            continue
        if not isinstance(body, dict) or not isinstance(body.get("reply"), str):
            unread.append((payload, "The body has no 'reply' text: it is not a flagged reply."))
            continue
        reply = body["reply"]
        found: list[tuple[str, str]] = []
        matches = body.get("matches")
        for match in matches if isinstance(matches, list) else ():
            tier = match.get(names.ATTR_TIER) if isinstance(match, dict) else None
            if isinstance(tier, str):
                phrase = match.get("phrase")
                found.append((tier, phrase if isinstance(phrase, str) else ""))
        matching = [e for e in detected if e.event_id not in covered
                    and (e.tier, e.attributes.get(names.ATTR_MATCHED_PHRASE, "")) in found]
        covered.update(e.event_id for e in matching)
        tools = body.get(names.ATTR_TOOLS_FIRED)
        similarity = body.get(names.ATTR_SIMILARITY)
        stories.append(FabricationStory(
            reply, tuple(place(reply, tier, phrase) for tier, phrase in found),
            tuple(t for t in tools if isinstance(t, str)) if isinstance(tools, list) else None,
            "" if similarity is None else str(similarity),
            found_in(matching[0]) if matching else names.FOUND_IN_AGENT))
    by_span: dict[str, list[TraceEvent]] = {}
    for event in detected:
        if event.event_id not in covered:
            by_span.setdefault(event.span_id, []).append(event)
    for span_id, found_events in by_span.items():
        conversation = span_conversations.get(span_id)
        reply = conversation.reply_text if conversation is not None else None
        first = found_events[0]
        stories.append(FabricationStory(
            reply, tuple(place(reply or "", e.tier or e.attributes.get(names.ATTR_TIER, ""),
                               e.attributes.get(names.ATTR_MATCHED_PHRASE, ""))
                         for e in found_events),
            event_list(first, names.ATTR_TOOLS_FIRED) if names.ATTR_TOOLS_FIRED in
            first.attributes else None,
            first.attributes.get(names.ATTR_SIMILARITY, ""), found_in(first)))
    return tuple(stories), tuple(unread)
