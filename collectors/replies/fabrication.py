"""Fabrication guard (family 2): replies that claim work no tool did, or that loop.

Two entry points, one engine (:mod:`~guardtrace.collectors.replies.conversation_guard`):

* :meth:`FabricationGuard.check_conversation` takes what an agent actually holds (the
  message list, tool results included, and the tool catalog) and judges the latest
  assistant reply within its turn, on all five tiers: ``action``, ``read``,
  ``text_tool_call``, ``ungrounded_result`` and ``repetition``.
* :meth:`FabricationGuard.check` is the simple case: one reply and the names of the tools
  that fired this turn, with the channel's last replies kept by the guard. Without the
  conversation there are no sources to ground values in, so ``ungrounded_result`` does
  not run there.

Both append one inline disclaimer per fired tier to the reply and emit the shared
telemetry (span event, capped counter, structured log, debug payload). Neither ever
raises: an internal error is counted in ``guardtrace.hook_errors`` and the reply comes
back unchanged.

:class:`FabricationDetector` decides without side effects; :func:`detect_fabrication`
and :func:`scan_fabrication_input` run it offline.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .conversation_guard import (
    CONVERSATION_TIERS,
    ConversationDetector,
    Finding,
    ReplyVerdict,
)
from ..errors import (
    GuardInputError,
    record_label,
    require_object,
    require_text,
)
from .loops import find_loop
from .reply_history import (
    HistoryEntry,
    InMemoryReplyHistory,
    ReplyHistory,
)
from ..emit.telemetry import GuardTelemetry, guarded, new_request_id
from ...schemas import names

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
    names.TIER_REPETITION: ("⚠️ This reply repeats what I already said ({percent}% the same) "
                            "with nothing new since: I'm looping."),
}

_OPERATION = "fabrication_detection"


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


def _dedupe(names_: Iterable[str]) -> tuple[str, ...]:
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
        tools = _dedupe(tools_fired)
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
def _default_detector() -> FabricationDetector:
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
    return (detector or _default_detector()).detect(reply, tools_fired, history)


def _quiet_on_error(self: FabricationGuard, reply: Any = "", tools_fired: Any = (),
                    *args: Any, **kwargs: Any) -> FabricationVerdict:
    # The fallback of `guarded`: the agent gets its reply back untouched.
    try:
        tools = _dedupe(tools_fired or ())
    except Exception:  # noqa: BLE001 - the fallback itself must not raise
        tools = ()
    return FabricationVerdict.quiet(reply if isinstance(reply, str) else "", tools)


def _quiet_conversation(self: FabricationGuard, messages: Any = (), *args: Any,
                        **kwargs: Any) -> FabricationVerdict:
    # The fallback of `guarded` for conversations: the last assistant text, unchanged.
    text = ""
    try:
        for message in reversed(list(messages)):
            role = message.get("role") if isinstance(message, Mapping) else getattr(
                message, "role", None)
            if role == "assistant":
                content = (message.get("content") if isinstance(message, Mapping)
                           else getattr(message, "content", None))
                text = content if isinstance(content, str) else ""
                break
    except Exception:  # noqa: BLE001 - the fallback itself must not raise
        pass
    return FabricationVerdict.quiet(text)


@dataclass
class FabricationGuard:
    """The hook an agent calls on each reply before showing it.

    Neither method raises: an internal error is counted in ``guardtrace.hook_errors``
    and returns an unflagged verdict with the reply unchanged.

    Args:
        detector: The tier configuration (defaults when omitted).
        history: The per-channel reply store of the simple check (an in-memory one of
            ``history_size`` replies per channel when omitted).
        module: The ``module`` label and attribute of this guard's telemetry (keyword
            only); None keeps ``replies``.

    Example:
        >>> guard = FabricationGuard()
        >>> guard.check("I'm deploying the patch now.", [], channel="c1").tiers
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
            tools_fired: Names of every tool that ran this turn (all model calls of the
                turn, not only the last one; see ``guardtrace.collectors.tool_calls``).
            channel: The conversation the reply belongs to. None skips ``repetition``
                and is not recorded: replies of unrelated conversations are never
                compared.
            request_id: Correlates telemetry; the current trace id or a random id when
                None.
            agent: The ``agent`` label and attribute (capped in the counter).

        Returns:
            The verdict; ``verdict.reply`` is what to show the user.
        """
        started = time.perf_counter()
        tools = _dedupe(tools_fired)
        history: Sequence[HistoryEntry] = ()
        if channel is not None:
            assert self.history is not None
            history = self.history.recent(channel)
        verdict = self.detector.detect(reply, tools, history)
        if channel is not None:
            # The original reply is stored, never the annotated one: the disclaimer
            # text would make every flagged reply look like every other.
            assert self.history is not None
            self.history.record(channel, HistoryEntry.from_text(reply))
        if verdict.flagged:
            self._emit(verdict, channel, request_id or new_request_id(), agent,
                       (time.perf_counter() - started) * 1000.0)
        return verdict

    @guarded(_quiet_conversation)
    def check_conversation(self, messages: Sequence[Any], tools: Any = None, *,
                           system: Any = None, channel: str | None = None,
                           request_id: str | None = None,
                           agent: str | None = None) -> FabricationVerdict:
        """Judge the latest assistant reply of a conversation and report what was found.

        Call it when the model has answered, before showing the answer: ``messages`` is
        the conversation as the agent holds it (OpenAI chat or Anthropic messages, tool
        calls and results included, the new reply last), ``tools`` the catalog the model
        was given (OpenAI, Responses, Anthropic, MCP or any JSON-schema tool objects).

        Args:
            messages: The conversation, oldest first.
            tools: The tool catalog; None when unknown (every call then counts as run,
                and tool kinds come from names alone).
            system: A system prompt passed apart from ``messages`` (Anthropic).
            channel: Recorded with the telemetry (the conversation's id).
            request_id: Correlates telemetry; generated when None.
            agent: The ``agent`` label and attribute (capped in the counter).

        Returns:
            The verdict on the last assistant reply with text (``msg_index`` set); an
            unflagged empty verdict when there is none.
        """
        started = time.perf_counter()
        verdict = self.detector.detect_last(messages, tools, system=system)
        if verdict is None:
            return FabricationVerdict.quiet("")
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
            "msg_index": verdict.msg_index,
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
        where ``tiers`` follow :data:`TIERS` order and ``similarity`` is the share of the
        reply an earlier one repeats (rounded to 4 places) when ``repetition`` fired, else
        None.

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
