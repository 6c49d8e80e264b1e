"""Fabrication guard (family 2): replies that claim work no tool did, or that loop.

Three tiers, checked against the tools that actually fired this turn:

1. ``action``: the reply claims write/execute work ("I'm deploying the patch now",
   "I've written the file", "Let me write it") and no write-class tool fired.
2. ``read``: the reply narrates reading ("Let me read the full content", "I'm looking at
   the logs") and no read-class tool fired. Only a read-class tool excuses it: writing a
   file or sending an email reads nothing. A tool that does both (a shell) can be put in
   both classes.
3. ``repetition``: the reply's character-4-shingle Jaccard similarity with one of the
   last 3 replies on the same channel is strictly above 0.70 (0.70 itself stays quiet).

:class:`FabricationDetector` decides (pure, thread-safe); :class:`FabricationGuard` is the
hook an agent calls after each reply: it keeps the channel history, appends one inline
disclaimer per flagged tier and emits telemetry. :func:`scan_fabrication_input` is the
offline scanner's per-record entry point.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from guardtrace.collectors.errors import (
    GuardInputError,
    record_label,
    require_object,
    require_text,
)
from guardtrace.collectors.fabrication_patterns import (
    DEFAULT_PATTERNS,
    DEFAULT_READ_TOOLS,
    DEFAULT_WRITE_TOOLS,
    PatternBank,
    prepare_text,
)
from guardtrace.collectors.reply_history import (
    HistoryEntry,
    InMemoryReplyHistory,
    ReplyHistory,
    jaccard,
    shingle_set,
)
from guardtrace.collectors.telemetry import GuardTelemetry, guarded, new_request_id
from guardtrace.schemas import names

__all__ = [
    "DEFAULT_DISCLAIMERS",
    "FabricationDetector",
    "FabricationGuard",
    "FabricationMatch",
    "FabricationVerdict",
    "TIERS",
    "detect_fabrication",
    "scan_fabrication_input",
]

TIERS: tuple[str, ...] = (names.TIER_ACTION, names.TIER_READ, names.TIER_REPETITION)

# Format fields: {phrase} (first matched phrase), {tools} ("none" or a comma list),
# {percent} (similarity, whole percent), {history_size}.
DEFAULT_DISCLAIMERS: Mapping[str, str] = {
    names.TIER_ACTION: ("⚠️ I used action language ('{phrase}') but did NOT call any "
                        "write/execute tool this turn. Tools fired: {tools}."),
    names.TIER_READ: ("⚠️ I described reading ('{phrase}') but did NOT call any "
                      "read/search tool this turn. Tools fired: {tools}."),
    names.TIER_REPETITION: ("⚠️ This reply is {percent}% similar to one of my last "
                            "{history_size} messages on this channel — I'm looping."),
}

_OPERATION = "fabrication_detection"
_MAX_PHRASES_PER_TIER = 5
_EXCERPT_CHARS = 80


@dataclass(frozen=True, slots=True)
class FabricationMatch:
    """Why a tier fired.

    Attributes:
        tier: ``"action"``, ``"read"`` or ``"repetition"``.
        phrase: The matched words (whitespace collapsed); for ``repetition``, an excerpt
            of the earlier reply this one repeats.
    """

    tier: str
    phrase: str


@dataclass(frozen=True)
class FabricationVerdict:
    """The outcome of one check.

    Attributes:
        flagged: True when at least one tier fired.
        tiers: The tiers that fired, in the order action, read, repetition.
        matches: Evidence for each fired tier, in tier order.
        similarity: Highest Jaccard similarity with the compared history; None when
            there was no history to compare with.
        reply: The reply to show: the original with one disclaimer line per fired tier
            appended, or the original unchanged when nothing fired.
        original_reply: The reply as given.
        tools_fired: The tool names given, deduplicated, in order.
        disclaimers: The appended disclaimer lines.
    """

    flagged: bool
    tiers: tuple[str, ...]
    matches: tuple[FabricationMatch, ...]
    similarity: float | None
    reply: str
    original_reply: str
    tools_fired: tuple[str, ...] = ()
    disclaimers: tuple[str, ...] = ()

    def phrase(self, tier: str) -> str | None:
        """The first matched phrase of ``tier``, or None if it did not fire."""
        return next((m.phrase for m in self.matches if m.tier == tier), None)

    @classmethod
    def quiet(cls, reply: str, tools_fired: Sequence[str] = ()) -> FabricationVerdict:
        """An unflagged verdict that leaves ``reply`` unchanged."""
        return cls(False, (), (), None, reply, reply, tuple(tools_fired))


def _tool_keys(name: str) -> tuple[str, ...]:
    # Case-insensitive, and namespaced names ("functions.write_file",
    # "mcp__fs__write_file") match on their last segment too.
    key = name.strip().casefold()
    last = key
    for sep in ("__", ".", "/", ":"):
        last = last.rsplit(sep, 1)[-1]
    return (key, last) if last != key else (key,)


def _dedupe(names_: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(n for n in names_ if isinstance(n, str) and n))


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _EXCERPT_CHARS else flat[:_EXCERPT_CHARS - 1] + "…"


class FabricationDetector:
    """Decides the three tiers for one reply. Immutable and safe to share across threads.

    Args:
        patterns: The tier 1 and 2 pattern bank (default :data:`DEFAULT_PATTERNS`).
        write_tools: Tool names that make action claims honest (case-insensitive).
        read_tools: Tool names that make read narration honest (case-insensitive).
        threshold: Tier 3 fires when the similarity is strictly above this.
        history_size: How many of the most recent earlier replies are compared.
        min_repetition_chars: Replies shorter than this (after whitespace collapsing)
            never fire tier 3: repeating "Done." or "Thanks!" is consistency, not a loop.
            Their similarity is still reported.
        disclaimers: Disclaimer templates by tier (see :data:`DEFAULT_DISCLAIMERS`).

    Raises:
        ValueError: ``threshold`` outside [0, 1], ``history_size`` below 1, or a
            disclaimer template missing for a tier.
    """

    def __init__(self, *, patterns: PatternBank = DEFAULT_PATTERNS,
                 write_tools: Iterable[str] = DEFAULT_WRITE_TOOLS,
                 read_tools: Iterable[str] = DEFAULT_READ_TOOLS,
                 threshold: float = 0.70, history_size: int = 3,
                 min_repetition_chars: int = 20,
                 disclaimers: Mapping[str, str] = DEFAULT_DISCLAIMERS) -> None:
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be within [0, 1], got {threshold}")
        if history_size < 1:
            raise ValueError(f"history_size must be at least 1, got {history_size}")
        missing = [t for t in TIERS if t not in disclaimers]
        if missing:
            raise ValueError(f"disclaimers missing for tiers {missing}")
        self.patterns = patterns
        self.write_tools = frozenset(t.casefold() for t in write_tools)
        self.read_tools = frozenset(t.casefold() for t in read_tools)
        self.threshold = threshold
        self.history_size = history_size
        self.min_repetition_chars = min_repetition_chars
        self.disclaimers = dict(disclaimers)

    def _fired(self, tools: Sequence[str], tool_class: frozenset[str]) -> bool:
        return any(key in tool_class for name in tools for key in _tool_keys(name))

    @staticmethod
    def _distinct(found: list[str]) -> list[str]:
        phrases: dict[str, str] = {}
        for phrase in found:
            phrases.setdefault(phrase.casefold(), phrase)
            if len(phrases) >= _MAX_PHRASES_PER_TIER:
                break
        return list(phrases.values())

    def detect(self, reply: str, tools_fired: Iterable[str] = (),
               history: Sequence[str | HistoryEntry] = (), *,
               current_shingles: set[int] | frozenset[int] | None = None,
               ) -> FabricationVerdict:
        """Check one reply.

        Args:
            reply: The assistant's reply text.
            tools_fired: Names of the tools that fired this turn (any order, any case).
            history: Earlier replies on the same channel, oldest first; only the last
                ``history_size`` are compared. Empty skips tier 3.
            current_shingles: ``shingle_set(reply)`` if the caller already has it.

        Returns:
            The verdict, with the disclaimers appended to ``reply`` when flagged.
        """
        tools = _dedupe(tools_fired)
        tiers: list[str] = []
        matches: list[FabricationMatch] = []
        # A tier whose tool class fired cannot fire: skip its regex work entirely.
        open_tiers = [tier for tier, tool_class in ((names.TIER_ACTION, self.write_tools),
                                                    (names.TIER_READ, self.read_tools))
                      if not self._fired(tools, tool_class)]
        if open_tiers:
            found = self.patterns.find_tiers(prepare_text(reply), open_tiers)
            for tier in open_tiers:
                phrases = self._distinct(found[tier])
                if phrases:
                    tiers.append(tier)
                    matches.extend(FabricationMatch(tier, p) for p in phrases)

        similarity: float | None = None
        recent = history[-self.history_size:] if history else ()
        if recent:
            current = shingle_set(reply) if current_shingles is None else current_shingles
            best_entry: HistoryEntry | None = None
            for item in recent:
                entry = item if isinstance(item, HistoryEntry) else HistoryEntry.from_text(item)
                score = jaccard(current, entry)
                if similarity is None or score > similarity:
                    similarity, best_entry = score, entry
            if (similarity is not None and best_entry is not None
                    and similarity > self.threshold
                    and len(" ".join(reply.split())) >= self.min_repetition_chars):
                tiers.append(names.TIER_REPETITION)
                matches.append(FabricationMatch(names.TIER_REPETITION,
                                                _excerpt(best_entry.text)))

        if not tiers:
            return FabricationVerdict(False, (), (), similarity, reply, reply, tools)
        disclaimers = tuple(self._disclaimer(t, matches, tools, similarity) for t in tiers)
        annotated = reply.rstrip() + "\n\n" + "\n".join(disclaimers)
        return FabricationVerdict(True, tuple(tiers), tuple(matches), similarity,
                                  annotated, reply, tools, disclaimers)

    def _disclaimer(self, tier: str, matches: Sequence[FabricationMatch],
                    tools: Sequence[str], similarity: float | None) -> str:
        phrase = next((m.phrase for m in matches if m.tier == tier), "")
        return self.disclaimers[tier].format(
            phrase=phrase,
            tools=", ".join(tools) if tools else "none",
            percent=round((similarity or 0.0) * 100),
            history_size=self.history_size,
        )


@functools.cache
def _default_detector() -> FabricationDetector:
    return FabricationDetector()


def detect_fabrication(reply: str, tools_fired: Iterable[str] = (),
                       history: Sequence[str | HistoryEntry] = (), *,
                       detector: FabricationDetector | None = None) -> FabricationVerdict:
    """Check one reply against explicit history, without telemetry or stored state.

    Args:
        reply: The assistant's reply text.
        tools_fired: Names of the tools that fired this turn.
        history: Earlier replies on the same channel, oldest first.
        detector: Configuration to use; the defaults when None.

    Returns:
        The verdict (see :meth:`FabricationDetector.detect`).
    """
    return (detector or _default_detector()).detect(reply, tools_fired, history)


def _quiet_on_error(self: FabricationGuard, reply: Any = "", tools_fired: Any = (),
                    *args: Any, **kwargs: Any) -> FabricationVerdict:
    # The fallback of `guarded`: the agent gets its reply back untouched.
    try:
        tools = _dedupe(tools_fired or ())
    except Exception:  # noqa: BLE001 - the fallback itself must not raise
        tools = ()
    return FabricationVerdict.quiet(reply, tools)


@dataclass
class FabricationGuard:
    """The hook an agent calls on each reply before showing it.

    ``check`` never raises: an internal error is counted in ``guardtrace.hook_errors``
    and returns an unflagged verdict with the reply unchanged.

    Args:
        detector: The tier configuration (defaults when omitted).
        history: The per-channel reply store (an in-memory one of ``history_size``
            replies per channel when omitted).
        module: The ``module`` label and attribute of this guard's telemetry, so an
            agent can report its own module (keyword only); None keeps ``replies``.

    Example:
        >>> guard = FabricationGuard()
        >>> verdict = guard.check("I'm deploying the patch now.", [], channel="c1")
        >>> verdict.tiers
        ('action',)
    """

    detector: FabricationDetector = field(default_factory=FabricationDetector)
    history: ReplyHistory | None = None
    module: str | None = field(default=None, kw_only=True)
    _telemetry: GuardTelemetry = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.history is None:
            self.history = InMemoryReplyHistory(size=self.detector.history_size)
        module = names.MODULE_REPLIES if self.module is None else self.module
        self._telemetry = GuardTelemetry(module, _OPERATION)

    @guarded(_quiet_on_error)
    def check(self, reply: str, tools_fired: Iterable[str] = (), *,
              channel: str | None = None, request_id: str | None = None,
              agent: str | None = None) -> FabricationVerdict:
        """Check a reply, remember it for the channel, and report what was found.

        Args:
            reply: The assistant's reply text.
            tools_fired: Names of every tool that fired this turn (all model calls of
                the turn, not only the last one; see ``guardtrace.collectors.tool_calls``).
            channel: The conversation the reply belongs to. None skips tier 3 and is
                not recorded: replies of unrelated conversations are never compared.
            request_id: Correlates telemetry; the current trace id or a random id when
                None.
            agent: The ``agent`` label and attribute (capped in the counter).

        Returns:
            The verdict; ``verdict.reply`` is what to show the user.
        """
        started = time.perf_counter()
        tools = _dedupe(tools_fired)
        history: Sequence[HistoryEntry] = ()
        current: set[int] | None = None
        if channel is not None:
            assert self.history is not None
            history = self.history.recent(channel)
            # Shingled once here: compared against the history, then stored in it.
            current = shingle_set(reply)
        verdict = self.detector.detect(reply, tools, history, current_shingles=current)
        if channel is not None and current is not None:
            # The original reply is stored, never the annotated one: the disclaimer
            # text would make every flagged reply look like every other.
            assert self.history is not None
            self.history.record(channel, HistoryEntry.from_text(reply, current))
        if verdict.flagged:
            self._emit(verdict, channel, request_id or new_request_id(), agent,
                       (time.perf_counter() - started) * 1000.0)
        return verdict

    def _emit(self, verdict: FabricationVerdict, channel: str | None, request_id: str,
              agent: str | None, duration_ms: float) -> None:
        tel = self._telemetry
        similarity = None if verdict.similarity is None else round(verdict.similarity, 4)
        tools = list(verdict.tools_fired)
        for tier in verdict.tiers:
            tel.event(names.EVENT_FABRICATION_DETECTED, request_id, {
                names.ATTR_TIER: tier,
                names.ATTR_MATCHED_PHRASE: verdict.phrase(tier),
                names.ATTR_TOOLS_FIRED: tools,
                names.ATTR_SIMILARITY: similarity if tier == names.TIER_REPETITION else None,
                names.ATTR_CHANNEL: channel,
                names.ATTR_AGENT: agent,
            })
            tel.count(names.METRIC_FABRICATIONS, agent=agent,
                      labels={names.ATTR_TIER: tier})
        tel.log(logging.WARNING, "fabrication detected", request_id=request_id,
                status="flagged", duration_ms=duration_ms, tiers=list(verdict.tiers),
                channel=channel, agent=agent)
        tel.payload(request_id, names.PAYLOAD_KIND_FABRICATION, {
            "reply": verdict.original_reply,
            names.ATTR_TOOLS_FIRED: tools,
            "tiers": list(verdict.tiers),
            "matches": [{names.ATTR_TIER: m.tier, "phrase": m.phrase}
                        for m in verdict.matches],
            names.ATTR_SIMILARITY: similarity,
            names.ATTR_CHANNEL: channel,
        }, agent=agent)


def _string_list(obj: Mapping[str, Any], key: str, record: str) -> list[str]:
    value = obj.get(key)
    if value is None:
        return []  # absent: no tools fired / no history
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise GuardInputError(
            f"{record}: '{key}' must be a list of strings, got {type(value).__name__}")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise GuardInputError(
                f"{record}: '{key}[{i}]' must be a string, got {type(item).__name__}")
    return list(value)


def scan_fabrication_input(obj: Mapping[str, Any], *,
                           detector: FabricationDetector | None = None) -> dict[str, Any]:
    """Check one offline record, as ``guardtrace scan fabrication`` reads them.

    Args:
        obj: ``{"id", "reply", "tools_fired": [names], "history": [earlier replies,
            oldest first], "channel"?}``. ``tools_fired`` and ``history`` may be absent
            or null (no tools, no history); ``channel`` is informational (the history is
            given explicitly).
        detector: Configuration to use; the defaults when None.

    Returns:
        ``{"id", "flagged", "tiers", "matches": [{"tier", "phrase"}], "similarity"}``,
        where ``tiers`` is ordered action, read, repetition and ``similarity`` is the
        highest Jaccard similarity with the last 3 history entries rounded to 4 places,
        or None without history.

    Raises:
        GuardInputError: ``obj`` is not a mapping, ``reply`` is missing or not a string,
            or ``tools_fired``/``history`` is not a list of strings.
    """
    require_object(obj, "fabrication scan record must be an object")
    record = record_label(obj, "record")
    reply = require_text(obj, "reply", record)
    tools = _string_list(obj, names.ATTR_TOOLS_FIRED, record)
    history = _string_list(obj, "history", record)
    verdict = detect_fabrication(reply, tools, history, detector=detector)
    return {
        "id": obj.get("id"),
        "flagged": verdict.flagged,
        "tiers": list(verdict.tiers),
        "matches": [{"tier": m.tier, "phrase": m.phrase} for m in verdict.matches],
        "similarity": None if verdict.similarity is None else round(verdict.similarity, 4),
    }
