"""The fabrication detector: the verdict on one reply, decided without side effects.

:class:`FabricationDetector` runs the conversation engine
(:mod:`~guardtrace.collectors.replies.conversation_guard`) on a whole conversation, or on
one reply with the tools fired this turn and the channel's earlier replies, and turns
its findings into a :class:`FabricationVerdict`: the tiers that fired, their evidence
and the reply with one inline disclaimer per tier. The guard that emits telemetry
around it is :class:`~guardtrace.collectors.replies.fabrication.FabricationGuard`;
:func:`detect_fabrication` runs it offline.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...schemas import names
from .conversation_guard import (
    CONVERSATION_TIERS,
    ConversationDetector,
    Finding,
    ReplyVerdict,
)
from .loops import find_loop
from .reply_history import HistoryEntry

__all__ = [
    "DEFAULT_DISCLAIMERS",
    "TIERS",
    "FabricationDetector",
    "FabricationMatch",
    "FabricationVerdict",
    "dedupe_names",
    "default_detector",
    "detect_fabrication",
]

TIERS: tuple[str, ...] = CONVERSATION_TIERS
# The tiers the simple check runs on the reply alone: without the conversation nothing
# grounds a value, and repetition is checked against the channel's history below.
_CLAIM_TIERS = (names.TIER_ACTION, names.TIER_READ, names.TIER_TEXT_TOOL_CALL)

# Format fields: {phrase} (the first evidence), {tools} ("none" or a comma list),
# {percent} (share of the reply repeated, whole percent).
DEFAULT_DISCLAIMERS: Mapping[str, str] = {
    names.TIER_ACTION: ("⚠️ I said I did or am doing something ('{phrase}') but no tool "
                        "that does it ran this turn. Tools fired: {tools}."),
    names.TIER_READ: ("⚠️ I said I checked or looked something up ('{phrase}') but no "
                      "lookup tool ran this turn. Tools fired: {tools}."),
    names.TIER_TEXT_TOOL_CALL: ("⚠️ I wrote a tool call out as text ('{phrase}') instead "
                                "of making it: it did NOT run. Tools fired: {tools}."),
    names.TIER_UNGROUNDED_RESULT: ("⚠️ I stated values ({phrase}) that no tool result or "
                                   "message in this conversation gave: treat them as "
                                   "unverified."),
    # The evidence, not the share of words: a transfer offer or a goodbye said again in
    # other words, or a failed call made again, is a loop however few words repeat.
    names.TIER_REPETITION: ("⚠️ This repeats an earlier step with nothing new since "
                            "({phrase}): I'm looping."),
}

@dataclass(frozen=True, slots=True)
class FabricationMatch:
    """Why a tier fired.

    Attributes:
        tier: One of :data:`TIERS`.
        phrase: The evidence: the claim's words, the typed call, the values with no
            source, or an excerpt of the reply this one repeats.
    """

    tier: str
    phrase: str


@dataclass(frozen=True)
class FabricationVerdict:
    """The outcome of one check.

    Attributes:
        flagged: True when at least one tier fired.
        tiers: The tiers that fired, in :data:`TIERS` order.
        matches: Evidence for each fired tier, in tier order.
        similarity: For ``repetition``, the share of the reply's content an earlier reply
            already said; None when the tier did not fire.
        reply: The reply to show: the original with one disclaimer line per fired tier
            appended, or the original unchanged when nothing fired.
        original_reply: The reply as given.
        tools_fired: The tools that ran this turn, deduplicated, in order.
        disclaimers: The appended disclaimer lines.
        msg_index: For :meth:`FabricationGuard.check_conversation`, the judged reply's
            index in the message list; None for :meth:`FabricationGuard.check`.
    """

    flagged: bool
    tiers: tuple[str, ...]
    matches: tuple[FabricationMatch, ...]
    similarity: float | None
    reply: str
    original_reply: str
    tools_fired: tuple[str, ...] = ()
    disclaimers: tuple[str, ...] = ()
    msg_index: int | None = None

    def phrase(self, tier: str) -> str | None:
        """The evidence of ``tier``, or None if it did not fire."""
        return next((m.phrase for m in self.matches if m.tier == tier), None)

    @classmethod
    def quiet(cls, reply: str, tools_fired: Sequence[str] = ()) -> FabricationVerdict:
        """An unflagged verdict that leaves ``reply`` unchanged."""
        return cls(False, (), (), None, reply, reply, tuple(tools_fired))


def dedupe_names(names_: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(n for n in names_ if isinstance(n, str) and n))


class FabricationDetector:
    """Decides the tiers for replies. Immutable and safe to share across threads.

    Args:
        tool_kinds: Kinds to force per tool name: ``"read"``, ``"write"``, ``"both"`` or
            ``"none"``, over what the catalog declares and the names say.
        write_tools: Shorthand: these names are write tools (``tool_kinds`` wins).
        read_tools: Shorthand: these names are read tools (a name in both lists is both).
        loop_threshold: Least share of content a reply and an earlier one must share
            (in both directions) for ``repetition``.
        history_size: How many of a channel's recent replies the simple check compares.
        min_loop_words: Replies with fewer content words never count as loops
            ("Thanks!", "Done.").
        disclaimers: Disclaimer templates by tier (see :data:`DEFAULT_DISCLAIMERS`).
        tiers: The tiers to run (all by default).

    Raises:
        ValueError: A setting out of range, an unknown tier, or a disclaimer missing for
            a tier.
    """

    def __init__(self, *, tool_kinds: Mapping[str, Any] | None = None,
                 write_tools: Iterable[str] = (), read_tools: Iterable[str] = (),
                 loop_threshold: float = 0.4, history_size: int = 3,
                 min_loop_words: int = 3,
                 disclaimers: Mapping[str, str] = DEFAULT_DISCLAIMERS,
                 tiers: Iterable[str] = TIERS) -> None:
        if history_size < 1:
            raise ValueError(f"history_size must be at least 1, got {history_size}")
        tiers = tuple(tiers)
        unknown = sorted(set(tiers) - set(TIERS))
        if unknown:
            raise ValueError(f"unknown tiers {unknown}; expected some of {TIERS}")
        missing = [t for t in tiers if t not in disclaimers]
        if missing:
            raise ValueError(f"disclaimers missing for tiers {missing}")
        kinds: dict[str, Any] = {}
        for name in write_tools:
            kinds[name] = {"write"}
        for name in read_tools:
            kinds[name] = kinds.get(name, set()) | {"read"}
        kinds.update(tool_kinds or {})
        self.engine = ConversationDetector(tool_kinds=kinds, loop_threshold=loop_threshold,
                                           min_loop_words=min_loop_words, tiers=tiers)
        self.history_size = history_size
        self.disclaimers = dict(disclaimers)

    @property
    def tiers(self) -> frozenset[str]:
        return self.engine.tiers

    def detect(self, reply: str, tools_fired: Iterable[str] = (),
               history: Sequence[str | HistoryEntry] = ()) -> FabricationVerdict:
        """Check one reply: the simple case, without the conversation.

        Args:
            reply: The assistant's reply text.
            tools_fired: Names of the tools that ran this turn (any order).
            history: Earlier replies on the same channel, oldest first; only the last
                ``history_size`` are compared. A reply with tools fired this turn made
                progress and is never a loop.

        Returns:
            The verdict, with the disclaimers appended to ``reply`` when flagged.
        """
        tools = dedupe_names(tools_fired)
        message = {"role": "assistant", "content": reply,
                   "tool_calls": [{"function": {"name": t}} for t in tools]}
        verdicts = self.engine.judge([message], None, tiers=_CLAIM_TIERS)
        if not verdicts:
            return FabricationVerdict.quiet(reply, tools)
        verdict = verdicts[0]
        recent = history[-self.history_size:] if history else ()
        # A tool that ran this turn is progress: such a reply is never a loop.
        if recent and not tools and names.TIER_REPETITION in self.tiers:
            entries = [item if isinstance(item, HistoryEntry) else HistoryEntry.from_text(item)
                       for item in recent]
            loop = find_loop(reply, [(i, e.text, e.words) for i, e in enumerate(entries)],
                             threshold=self.engine.loop_threshold,
                             min_words=self.engine.min_loop_words)
            if loop is not None:
                verdict = dataclasses.replace(
                    verdict, tiers=(*verdict.tiers, names.TIER_REPETITION),
                    findings=(*verdict.findings, Finding(names.TIER_REPETITION, loop.excerpt)),
                    similarity=round(loop.similarity, 4))
        return self._verdict(reply, verdict, tools)

    def detect_conversation(self, messages: Sequence[Any], tools: Any = None, *,
                            system: Any = None, only: Iterable[int] | None = None,
                            ) -> list[FabricationVerdict]:
        """Judge the assistant replies of a conversation (all five tiers).

        Args:
            messages: OpenAI chat or Anthropic messages, tool results included.
            tools: The tool catalog in any shape (None: unknown).
            system: A system prompt given apart from ``messages`` (Anthropic).
            only: Judge only the replies at these message indices.

        Returns:
            One verdict per judged reply (``msg_index`` set), in order.

        Raises:
            GuardInputError: ``messages`` or ``tools`` cannot be read.
        """
        return [self._verdict(v.text, v, v.tools_fired)
                for v in self.engine.judge(messages, tools, system=system, only=only)]

    def detect_last(self, messages: Sequence[Any], tools: Any = None, *,
                    system: Any = None) -> FabricationVerdict | None:
        """Judge only the last assistant reply of a conversation; None when it has none."""
        verdicts = self.engine.judge(messages, tools, system=system, last_only=True)
        return self._verdict(verdicts[0].text, verdicts[0], verdicts[0].tools_fired) \
            if verdicts else None

    def _verdict(self, reply: str, verdict: ReplyVerdict,
                 tools: Sequence[str]) -> FabricationVerdict:
        matches = tuple(FabricationMatch(f.tier, f.evidence) for f in verdict.findings)
        if not verdict.tiers:
            return FabricationVerdict(False, (), (), None, reply, reply, tuple(tools),
                                      msg_index=verdict.msg_index)
        disclaimers = tuple(self._disclaimer(t, matches, tools, verdict.similarity)
                            for t in verdict.tiers)
        annotated = reply.rstrip() + "\n\n" + "\n".join(disclaimers)
        return FabricationVerdict(True, verdict.tiers, matches, verdict.similarity,
                                  annotated, reply, tuple(tools), disclaimers,
                                  verdict.msg_index)

    def _disclaimer(self, tier: str, matches: Sequence[FabricationMatch],
                    tools: Sequence[str], similarity: float | None) -> str:
        phrase = next((m.phrase for m in matches if m.tier == tier), "")
        return self.disclaimers[tier].format(
            phrase=phrase, tools=", ".join(tools) if tools else "none",
            percent=round((similarity or 0.0) * 100))


@functools.cache
def default_detector() -> FabricationDetector:
    """The shared detector with the default settings."""
    return FabricationDetector()


def detect_fabrication(reply: str, tools_fired: Iterable[str] = (),
                       history: Sequence[str | HistoryEntry] = (), *,
                       detector: FabricationDetector | None = None) -> FabricationVerdict:
    """Check one reply against explicit history, without telemetry or stored state.

    Args:
        reply: The assistant's reply text.
        tools_fired: Names of the tools that ran this turn.
        history: Earlier replies on the same channel, oldest first.
        detector: Configuration to use; the defaults when None.

    Returns:
        The verdict (see :meth:`FabricationDetector.detect`).
    """
    return (detector or default_detector()).detect(reply, tools_fired, history)
