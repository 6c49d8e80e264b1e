"""Judge every assistant reply of a conversation against what really happened in it.

This is the fabrication guard's full entry point: it takes what an agent actually holds
(the message list, tool results included, and the tool catalog) and judges each assistant
message within its turn. Five tiers:

* ``action``: the reply says write/execute work is done or under way, and no call of a
  tool that does that work ran in its turn (for "already done" claims: in the
  conversation so far).
* ``read``: the same for looking something up; a claimed fresh check ("I double-checked",
  "let me check" and the turn ends) needs a read in the turn itself.
* ``text_tool_call``: the reply writes a tool call out as text (JSON, a tag, an
  ``Action:`` line, ``tool(arg=...)``) naming a catalog tool, and the message made no
  real call of it.
* ``ungrounded_result``: the reply states concrete values (ids, amounts, times) that no
  tool result, user message or system prompt gave, and that are not arithmetic on values
  that were given; or it reports a write's outcome its result contradicts (money the
  result does not bear out, a field value the write asked for and the result does not
  show); or it states what a calculator computed from a number nothing gave.
* ``repetition``: the reply repeats an earlier one with no tool result between them and
  no call of its own: a loop; or it makes again, unchanged, the calls that just failed.

:class:`ConversationDetector` is pure and thread-safe. :func:`judge_conversation` runs it
with the defaults.
"""

from __future__ import annotations

import functools
import json
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...schemas import names
from ..tool_catalog import read_tool_specs
from .arithmetic import expression_operands, invented_operands
from .claim_backing import ClaimMatcher
from .claims import DONE, find_claims
from .conversation import Conversation, ToolCall, read_conversation
from .grounding import (
    Grounds,
    UngroundedValue,
    find_misreported_outcomes,
    find_ungrounded,
    result_amounts,
)
from .loops import NEAR_VERBATIM, excerpt, find_loop, reports_failure
from .run_outcomes import find_run_outcomes, unseen_outcomes
from .text_tool_calls import find_text_tool_calls
from .tool_kinds import ToolKinds
from .verbs import READ, WRITE
from .write_outcomes import (
    UnappliedField,
    after_write,
    find_contradicted_fields,
)

__all__ = [
    "CONVERSATION_TIERS",
    "ConversationDetector",
    "Finding",
    "ReplyVerdict",
    "judge_conversation",
]

CONVERSATION_TIERS: tuple[str, ...] = (
    names.TIER_ACTION, names.TIER_READ, names.TIER_TEXT_TOOL_CALL,
    names.TIER_UNGROUNDED_RESULT, names.TIER_REPETITION)

_TIER_ORDER = {tier: i for i, tier in enumerate(CONVERSATION_TIERS)}
_MAX_EVIDENCE = 3
_CACHED_CATALOGS = 16
# Money amounts of writes' results kept for the outcome check, per turn and before it,
# and fields a write of the turn asked for that its result does not show.
_MAX_WRITE_AMOUNTS = 64
_MAX_UNAPPLIED = 64
# A reply is read at its first 32 KB and last 8 KB, a source message (a tool result, the
# system prompt) at its first 256 KB. No real reply is that long; the guards run on the
# agent's thread, and the bound keeps any input, however crafted, under a fixed cost.
_REPLY_HEAD_CHARS = 32 * 1024
_REPLY_TAIL_CHARS = 8 * 1024
_MAX_SOURCE_CHARS = 256 * 1024
# What the user said since the latest reply is read at this much per message (for loops).
_MAX_USER_CHARS = 8 * 1024
# Earlier replies a reply may repeat: those since the latest new tool result, at most this
# many (the latest). A run whose results repeat ("OK" after every edit) or a chat with no
# tools would otherwise compare each reply with all before it.
_MAX_LOOP_CANDIDATES = 32
# A run's outcome is judged against the calls of at most this many messages before it:
# each reply with an outcome would otherwise read its whole turn again (a coding agent's
# run is one long turn).
_MAX_RUN_LOOKBACK = 256
# Arguments longer than this (an edit's whole file) are compared as written.
_MAX_CALL_KEY_CHARS = 16 * 1024
# What a failed call's result shows in the evidence of its retry, at most.
_FAILURE_EXCERPT_CHARS = 400


def _bounded(text: str) -> str:
    if len(text) <= _REPLY_HEAD_CHARS + _REPLY_TAIL_CHARS:
        return text
    return text[:_REPLY_HEAD_CHARS] + "\n" + text[-_REPLY_TAIL_CHARS:]


@dataclass(frozen=True, slots=True)
class Finding:
    """Why a tier fired for a reply.

    Attributes:
        tier: One of :data:`CONVERSATION_TIERS`.
        evidence: The words that fired it (a claim, a typed call, the values with no
            source, or an excerpt of the reply it repeats).
    """

    tier: str
    evidence: str


@dataclass(frozen=True)
class ReplyVerdict:
    """The verdict on one assistant reply.

    Attributes:
        msg_index: The reply's index in the message list.
        text: The reply's text, as judged.
        tiers: The tiers that fired, in :data:`CONVERSATION_TIERS` order.
        findings: Evidence per fired tier, in the same order.
        tools_fired: The agent's calls of the reply's turn that ran, in order.
        similarity: For ``repetition``, the share of content repeated.
        repeats: For ``repetition``, the index of the reply it repeats.
    """

    msg_index: int
    text: str = ""
    tiers: tuple[str, ...] = ()
    findings: tuple[Finding, ...] = ()
    tools_fired: tuple[str, ...] = ()
    similarity: float | None = None
    repeats: int | None = None

    @property
    def flagged(self) -> bool:
        return bool(self.tiers)

    def evidence(self, tier: str) -> str | None:
        """The evidence of ``tier``, or None if it did not fire."""
        return next((f.evidence for f in self.findings if f.tier == tier), None)


@dataclass(frozen=True)
class _Catalog:
    names: frozenset[str]
    kinds: ToolKinds
    matcher: ClaimMatcher


# What the detector reads of each tool: its name, description and declared kind.
_ToolEntries = tuple[tuple[str, str, str | None], ...]


def _tool_entries(tools: Any) -> _ToolEntries:
    specs = read_tool_specs(tools) if tools else ()
    return tuple((s.name, s.description, s.declared_kind) for s in specs)


def _read_catalog(entries: _ToolEntries, overrides: Mapping[str, Any] | None) -> _Catalog:
    kinds = ToolKinds.from_catalog(entries, overrides)
    names_ = frozenset(name for name, _, _ in entries)
    return _Catalog(names_, kinds, ClaimMatcher(kinds, [name for name, _, _ in entries]))


class ConversationDetector:
    """Judges the assistant replies of a conversation.

    Args:
        tool_kinds: Kinds to force per tool name (``"read"``, ``"write"``, ``"both"``,
            ``"none"``), over what the catalog declares or its names say.
        loop_threshold: Least share of content a reply and an earlier one must share
            (in both directions) for a loop.
        min_loop_words: Replies with fewer content words never count as loops.
        tiers: The tiers to run (all by default).
    """

    def __init__(self, *, tool_kinds: Mapping[str, Any] | None = None,
                 loop_threshold: float = 0.4, min_loop_words: int = 3,
                 tiers: Iterable[str] = CONVERSATION_TIERS) -> None:
        unknown = sorted(set(tiers) - set(CONVERSATION_TIERS))
        if unknown:
            raise ValueError(f"unknown tiers {unknown}; expected some of {CONVERSATION_TIERS}")
        if not 0.0 < loop_threshold <= 1.0:
            raise ValueError(f"loop_threshold must be within (0, 1], got {loop_threshold}")
        self.tool_kinds = dict(tool_kinds or {})
        ToolKinds.from_catalog((), self.tool_kinds)  # a bad kind fails here, not per reply
        # Agents pass the same tool list object on every call: it is read once. A list is
        # read again when it is another object or its length changed (a tool definition
        # edited in place is not noticed: pass a new list when the tools change).
        self._catalogs: OrderedDict[int, tuple[Any, int, _Catalog]] = OrderedDict()
        # A new list of the same tools (an agent that builds its tool list per call) is
        # read again, but what the detector makes of the tools is kept by their content.
        self._catalogs_by_content: OrderedDict[_ToolEntries, _Catalog] = OrderedDict()
        self._catalogs_lock = threading.Lock()
        self.loop_threshold = loop_threshold
        self.min_loop_words = min_loop_words
        self.tiers = frozenset(tiers)

    def judge(self, messages: Sequence[Any], tools: Any = None, *, system: Any = None,
              only: Iterable[int] | None = None, last_only: bool = False,
              tiers: Iterable[str] | None = None) -> list[ReplyVerdict]:
        """Judge the replies of a conversation.

        Args:
            messages: The conversation in OpenAI chat or Anthropic messages shape.
            tools: The tool catalog in any shape :func:`read_tool_specs` reads; None when
                unknown (then every requested call counts as run and kinds come from
                tool names alone).
            system: A system prompt given apart from ``messages`` (Anthropic).
            only: Judge only the replies at these message indices (the rest are still
                read as context).
            last_only: Judge only the last reply (what an agent is about to show).
            tiers: Run only these of the detector's tiers.

        Returns:
            One verdict per judged reply (assistant text of the model's own), in order.

        Raises:
            GuardInputError: ``messages`` or ``tools`` cannot be read.
        """
        catalog = self._catalog(tools)
        conv = read_conversation(messages, catalog.names, system=system)
        wanted = None if only is None else set(only)
        if last_only:
            # The last reply, looked for from the end (it is the last message, mostly).
            last = next((m for m in reversed(conv.messages) if m.is_reply), None)
            wanted = {last.index} if last is not None else set()
        run = self.tiers if tiers is None else self.tiers & frozenset(tiers)
        grounds = Grounds()
        since_result: list[tuple[int, str, frozenset[str] | None]] = []
        results_seen: set[int] = set()
        user_said: list[str] = []  # what the user said since the latest reply
        calls_made = _CallsMade()  # the calls made so far, by tool and arguments
        latest = _LatestCalls()  # the latest calls made, and which failed
        # Per turn, read once however long the conversation: the names of the calls of
        # the turn and of all turns before it, and the money the turn's writes returned.
        turns = _Turns(conv, catalog.kinds)
        verdicts: list[ReplyVerdict] = []
        for position, message in enumerate(conv.messages):
            if conv.turn_bounds(position)[0] != turns.start:
                turns.begin(position)
            if message.role in ("system", "user", "tool"):
                if message.role == "tool":
                    # Only a new result is progress: the same error again, or the
                    # empty result of a scratchpad tool, is not.
                    result = message.text.strip()
                    if result and hash(result) not in results_seen:
                        since_result.clear()
                        results_seen.add(hash(result))
                    call = conv.call_answered(position)
                    if call is not None:
                        latest.answered(call, result, message.is_error)
                    if call is None or _grounded_result(call.arguments, grounds):
                        grounds.add_result(message.text[:_MAX_SOURCE_CHARS])
                    else:
                        grounds.add_guess(message.text)
                    if (call is not None and conv.ran(call)
                            and WRITE in (catalog.kinds.of(call.name) or ())):
                        source = message.text[:_MAX_SOURCE_CHARS]
                        turns.write_amounts = (turns.write_amounts + result_amounts(
                            source))[-_MAX_WRITE_AMOUNTS:]
                        turns.unapplied = after_write(turns.unapplied, call.arguments,
                                                      source)[-_MAX_UNAPPLIED:]
                else:
                    grounds.add(message.text[:_MAX_SOURCE_CHARS])
                    if message.role == "user":
                        user_said.append(message.text[:_MAX_USER_CHARS])
                        latest.user_spoke()
                continue
            if not message.is_reply:
                calls_made.add(message.calls)
                latest.made(message.index, message.calls)
                continue
            if wanted is None or message.index in wanted:
                # Only a reply that could repeat one asks whether its calls are retries.
                # A reply whose calls are new is judged too when the latest calls all
                # failed: the same words again after the same error are the loop, however
                # the call changed (it must then say them almost word for word).
                retried = not message.calls or (bool(since_result) and (
                    calls_made.all_made(message.calls) or latest.all_failed()))
                verdicts.append(self._judge(conv, catalog, position, grounds, since_result,
                                            run, turns.state(), " ".join(user_said),
                                            retried, latest.failed_again(message.calls)))
            calls_made.add(message.calls)
            latest.made(message.index, message.calls)
            # A reply with a call stays an earlier reply to repeat: the call is not
            # progress, its result is (and the same error again clears nothing).
            since_result.append((message.index, _bounded(message.text), None))
            del since_result[:-_MAX_LOOP_CANDIDATES]
            grounds.add_said(message.text[:_MAX_SOURCE_CHARS])
            user_said.clear()
        return verdicts

    def _judge(self, conv: Conversation, catalog: _Catalog, position: int, grounds: Grounds,
               since_result: list[tuple[int, str, frozenset[str] | None]],
               run: frozenset[str], turn: _TurnState, user_said: str = "",
               retried: bool = True,
               failed_again: tuple[int, str] | None = None) -> ReplyVerdict:
        message = conv.messages[position]
        text = _bounded(message.text)
        turn_calls = turn.calls
        findings: list[Finding] = []
        if run & {names.TIER_ACTION, names.TIER_READ}:
            findings += [f for f in self._claims(text, catalog, turn) if f.tier in run]
        if names.TIER_TEXT_TOOL_CALL in run:
            called = {c.name for c in message.calls}
            typed = [t for t in find_text_tool_calls(text, catalog.names)
                     if t.name not in called]
            if typed:
                findings.append(Finding(names.TIER_TEXT_TOOL_CALL,
                                        names.EVIDENCE_SEPARATOR.join(
                                            t.excerpt for t in typed[:_MAX_EVIDENCE])))
        if names.TIER_UNGROUNDED_RESULT in run:
            values = find_ungrounded(text, grounds,
                                     ignore=(n.lower() for n in catalog.names))
            values += find_misreported_outcomes(text, turn.write_amounts,
                                                turn.earlier_write_amounts)
            values += [UngroundedValue("outcome", f.evidence)
                       for f in find_contradicted_fields(text, turn.unapplied)]
            outcomes = find_run_outcomes(text)
            if outcomes:
                steps = conv.calls_with_results(
                    max(conv.turn_bounds(position)[0], position - _MAX_RUN_LOOKBACK), position)
                values += [UngroundedValue("outcome", phrase)
                           for phrase in unseen_outcomes(outcomes, steps, catalog.kinds)]
            if values:
                findings.append(Finding(names.TIER_UNGROUNDED_RESULT,
                                        names.EVIDENCE_SEPARATOR.join(
                                            v.text for v in values[:_MAX_EVIDENCE])))
        similarity = repeats = None
        if names.TIER_REPETITION in run and failed_again is not None:
            # The calls that just failed, made again as they were: the same error is all
            # they can return, whatever the reply says it changed.
            repeats, failure = failed_again
            findings.append(Finding(names.TIER_REPETITION, failure))
            similarity = 1.0
        elif names.TIER_REPETITION in run and retried:
            # A reply that makes a new call is trying something new. One that only makes
            # calls made before, or new ones after the latest calls all failed, loops
            # when it says again almost word for word what an earlier reply said: the
            # same update retried after the same error.
            threshold = (self.loop_threshold if not message.calls
                         else max(self.loop_threshold, NEAR_VERBATIM))
            loop = find_loop(text, since_result, threshold=threshold,
                             min_words=self.min_loop_words, user_said=user_said)
            if loop is not None:
                findings.append(Finding(names.TIER_REPETITION, loop.excerpt))
                similarity, repeats = round(loop.similarity, 4), loop.earlier_index
        findings.sort(key=lambda f: _TIER_ORDER[f.tier])
        return ReplyVerdict(message.index, message.text, tuple(f.tier for f in findings),
                            tuple(findings),
                            tuple(dict.fromkeys(turn_calls)), similarity, repeats)

    def _catalog(self, tools: Any) -> _Catalog:
        if not isinstance(tools, (list, tuple)) or not tools:
            return _read_catalog(_tool_entries(tools), self.tool_kinds)
        with self._catalogs_lock:
            hit = self._catalogs.get(id(tools))
            if hit is not None and hit[0] is tools and hit[1] == len(tools):
                self._catalogs.move_to_end(id(tools))
                return hit[2]
        entries = _tool_entries(tools)
        with self._catalogs_lock:
            catalog = self._catalogs_by_content.get(entries)
            if catalog is not None:
                self._catalogs_by_content.move_to_end(entries)
        if catalog is None:
            catalog = _read_catalog(entries, self.tool_kinds)
        with self._catalogs_lock:
            # The entry holds the list itself, so its id cannot be reused while cached.
            self._catalogs[id(tools)] = (tools, len(tools), catalog)
            self._catalogs_by_content[entries] = catalog
            for cache in (self._catalogs, self._catalogs_by_content):
                while len(cache) > _CACHED_CATALOGS:
                    cache.popitem(last=False)
        return catalog

    @staticmethod
    def _claims(text: str, catalog: _Catalog, turn: _TurnState) -> list[Finding]:
        unbacked: dict[str, list[str]] = {}
        claims = find_claims(text)
        backed = [catalog.matcher.backed(c, turn.calls, turn.call_kinds) for c in claims]
        # "I'll check and enable it now" with the enable call made: the write reads the
        # state it changes, so a read joined to a backed write is part of it.
        joined_writes = {c.joined for c, ok in zip(claims, backed, strict=True)
                         if ok and c.kind == WRITE and c.joined >= 0}
        for claim, ok in zip(claims, backed, strict=True):
            if ok or (claim.kind == READ and not claim.fresh
                      and claim.joined in joined_writes):
                continue
            if claim.time == DONE and not claim.fresh and catalog.matcher.backed(
                    claim, turn.earlier_calls, turn.earlier_call_kinds):
                continue  # a true report of work done in an earlier turn
            tier = names.TIER_READ if claim.kind == READ else names.TIER_ACTION
            unbacked.setdefault(tier, []).append(claim.phrase)
        return [Finding(tier, names.EVIDENCE_SEPARATOR.join(
                    dict.fromkeys(phrases[:_MAX_EVIDENCE])))
                for tier, phrases in unbacked.items()]


@dataclass(frozen=True, slots=True)
class _TurnState:
    """What a reply is judged against: the calls of its turn and of the turns before."""

    calls: tuple[str, ...] = ()
    earlier_calls: tuple[str, ...] = ()
    # What the calls of each tool did, read from their arguments (an editor that only
    # viewed reads); None: may have done anything.
    call_kinds: Mapping[str, frozenset[str] | None] = field(default_factory=dict)
    earlier_call_kinds: Mapping[str, frozenset[str] | None] = field(default_factory=dict)
    write_amounts: Sequence[float] = ()
    earlier_write_amounts: Sequence[float] = ()
    unapplied: Sequence[UnappliedField] = ()


class _Turns:
    """The turns of a conversation, as `ConversationDetector.judge` walks it.

    The walk tells it where a turn begins (:meth:`begin`) and what the writes of the turn
    returned (``write_amounts``). The calls are read only for a turn with a reply to judge
    (an agent judges its last reply only), each call once however many turns are
    judged: the calls before a judged turn are read on from where the last one stopped.
    """

    def __init__(self, conv: Conversation, kinds: ToolKinds) -> None:
        self._conv = conv
        self._kinds = kinds
        self.start = -1
        self._end = 0
        # The money the writes of this turn returned, and of the turns before it.
        self.write_amounts: list[float] = []
        self._earlier_write_amounts: list[float] = []
        # The fields this turn's writes asked for that their results do not show.
        self.unapplied: list[UnappliedField] = []
        # The calls before position `_read_to`: names in the order first called, and what
        # the calls of each did.
        self._read_to = 0
        self._earlier_names: dict[str, None] = {}
        self._earlier_kinds: dict[str, frozenset[str] | None] = {}
        # This turn's calls and the calls before it, once read.
        self._calls: tuple[tuple[str, ...], dict[str, frozenset[str] | None],
                           tuple[str, ...], dict[str, frozenset[str] | None]] | None = None

    def begin(self, position: int) -> None:
        """Move to the turn that holds ``position``: this turn's writes become earlier."""
        self._earlier_write_amounts = (self._earlier_write_amounts
                                       + self.write_amounts)[-_MAX_WRITE_AMOUNTS:]
        self.write_amounts = []
        self.unapplied = []
        self.start, self._end = self._conv.turn_bounds(position)
        self._calls = None

    def state(self) -> _TurnState:
        """What a reply of this turn is judged against, as things stand."""
        if self._calls is None:
            earlier = self._conv.agent_calls(self._read_to, self.start)
            self._earlier_names.update(dict.fromkeys(call.name for _, call in earlier))
            self._add_kinds(self._earlier_kinds, earlier)
            self._read_to = max(self._read_to, self.start)
            turn_calls = self._conv.agent_calls(self.start, self._end)
            call_kinds: dict[str, frozenset[str] | None] = {}
            self._add_kinds(call_kinds, turn_calls)
            self._calls = (tuple(dict.fromkeys(c.name for _, c in turn_calls)), call_kinds,
                           tuple(self._earlier_names), dict(self._earlier_kinds))
        calls, call_kinds, earlier_calls, earlier_call_kinds = self._calls
        return _TurnState(calls, earlier_calls, call_kinds, earlier_call_kinds,
                          self.write_amounts, self._earlier_write_amounts, self.unapplied)

    def _add_kinds(self, into: dict[str, frozenset[str] | None],
                   calls: Sequence[tuple[int, ToolCall]]) -> None:
        """Add what each of ``calls`` did to ``into``, by tool: several calls of one tool
        did the union of what each did; unknown absorbs all."""
        for _, call in calls:
            found = self._kinds.of_call(call.name, call.arguments)
            if call.name not in into:
                into[call.name] = found
            else:
                known = into[call.name]
                into[call.name] = None if known is None or found is None else known | found


class _CallsMade:
    """The calls an agent made so far; each one's arguments are read (as JSON) only when
    a reply's calls are asked about, which is rare: most replies make no call, or come
    after a new result."""

    def __init__(self) -> None:
        self._calls: list[ToolCall] = []
        self._keys: set[int] = set()
        self._keyed = 0  # calls whose key is in _keys

    def add(self, calls: Sequence[ToolCall]) -> None:
        self._calls.extend(calls)

    def all_made(self, calls: Sequence[ToolCall]) -> bool:
        """Whether every one of ``calls`` was made before, with the same arguments."""
        self._keys.update(_call_key(call) for call in self._calls[self._keyed:])
        self._keyed = len(self._calls)
        return all(_call_key(call) in self._keys for call in calls)


class _LatestCalls:
    """The calls of the latest message that made any, and what their results said with
    nothing said by the user since: made again exactly after failing for good (see
    :func:`~.loops.reports_failure`), they can only fail again."""

    def __init__(self) -> None:
        self._index = -1
        self._ids: set[int] = set()  # the calls' ids (the conversation holds them)
        self._answers: list[tuple[ToolCall, str, bool]] = []  # (call, result, marked)
        # The answers that failed, read once when first asked (None: not read yet).
        self._failed: list[tuple[ToolCall, str]] | None = None

    def made(self, index: int, calls: Sequence[ToolCall]) -> None:
        if calls:
            self._index, self._ids = index, {id(c) for c in calls}
            self._answers, self._failed = [], None

    def answered(self, call: ToolCall, result: str, marked: bool) -> None:
        if id(call) in self._ids:
            self._answers.append((call, result[:_FAILURE_EXCERPT_CHARS], marked))
            self._failed = None

    def _failures(self) -> list[tuple[ToolCall, str]]:
        if self._failed is None:
            self._failed = [(call, result) for call, result, marked in self._answers
                            if reports_failure(result, marked)]
        return self._failed

    def all_failed(self) -> bool:
        """Whether the latest calls were answered, every answer a failure."""
        return bool(self._answers) and len(self._failures()) == len(self._answers)

    def user_spoke(self) -> None:
        # The user may have changed what made the calls fail.
        self._answers, self._failed = [], None

    def failed_again(self, calls: Sequence[ToolCall]) -> tuple[int, str] | None:
        """``(index of the message that made them, what they returned)`` when every one
        of ``calls`` is one of the latest calls and failed; else None. Read only when
        asked, and keyed (an edit's arguments can be a whole file) only when the names
        and the failures already say so."""
        if not calls or not self._answers:
            return None
        failed = self._failures()
        if not {c.name for c in calls} <= {call.name for call, _ in failed}:
            return None
        keys = {_call_key(call): result for call, result in failed}
        repeated = [_call_key(c) for c in calls]
        if not all(key in keys for key in repeated):
            return None
        return (self._index,
                f"{calls[0].name} again after it failed: {excerpt(keys[repeated[0]])}")


def _call_key(call: ToolCall) -> int:
    """The call by tool and arguments, however the arguments' JSON is spaced or ordered."""
    arguments = call.arguments
    if len(arguments) <= _MAX_CALL_KEY_CHARS:
        try:
            arguments = json.dumps(json.loads(arguments), sort_keys=True)
        except (ValueError, RecursionError):
            pass  # not JSON: compared as written
    return hash((call.name, arguments))


def _grounded_result(arguments: str, grounds: Grounds) -> bool:
    # A calculator's result is only as grounded as its operands ("498 * 1.5" with no 1.5
    # seen anywhere computes a price no one gave).
    operands = expression_operands(arguments)
    return operands is None or not invented_operands(operands, grounds.operand_known,
                                                   grounds.has_percent)


@functools.cache
def _default_detector() -> ConversationDetector:
    return ConversationDetector()


def judge_conversation(messages: Sequence[Any], tools: Any = None, *, system: Any = None,
                       detector: ConversationDetector | None = None) -> list[ReplyVerdict]:
    """Judge every reply of a conversation with ``detector`` (the defaults when None).

    See :meth:`ConversationDetector.judge`.
    """
    return (detector or _default_detector()).judge(messages, tools, system=system)



