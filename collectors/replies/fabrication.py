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
telemetry (span event, capped counter, structured log, debug payload). Every reply
judged is also one ``gen_ai.evaluation.result`` event named ``guardtrace.fabrication``:
``fail`` with the fired tiers and their evidence as the explanation, ``pass`` when no
tier fired, ``error.type`` when the check failed. Neither ever raises: an internal
error is counted in ``guardtrace.hook_errors`` and the reply comes back unchanged.

:class:`FabricationDetector` (:mod:`~guardtrace.collectors.replies.fabrication_detector`)
decides without side effects; :func:`detect_fabrication` runs it offline (``guardtrace scan
fabrication`` through :mod:`guardtrace.cli.scan_records`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...schemas import names
from ...schemas.request_ids import storable_request_id
from ..emit.telemetry import GuardTelemetry, guarded, new_request_id
from .fabrication_detector import (
    DEFAULT_DISCLAIMERS,
    TIERS,
    FabricationDetector,
    FabricationMatch,
    FabricationVerdict,
    dedupe_names,
    detect_fabrication,
)
from .reply_history import (
    HistoryEntry,
    InMemoryReplyHistory,
    ReplyHistory,
)

# The detector's names stay importable from here, their home before fabrication_detector.py.
__all__ = [
    "DEFAULT_DISCLAIMERS",
    "FabricationDetector",
    "FabricationGuard",
    "FabricationMatch",
    "FabricationVerdict",
    "TIERS",
    "detect_fabrication",
]

_OPERATION = "fabrication_detection"
# The explanation of a fabrication evaluation where no tier fired.
_PASS_EXPLANATION = "no claim without a backing tool call, no loop"
# Evidence shown per tier in an evaluation's explanation: enough to recognise the claim,
# and room for every fired tier within the explanation's bound.
_EVIDENCE_CHARS = 160


def _fail_explanation(verdict: FabricationVerdict) -> str:
    """Each fired tier with its evidence, e.g. ``action: "I've deployed the fix"``."""
    parts = []
    for tier in verdict.tiers:
        phrase = verdict.phrase(tier) or ""
        if len(phrase) > _EVIDENCE_CHARS:
            phrase = phrase[:_EVIDENCE_CHARS] + "…"
        part = f'{tier}: "{phrase}"'
        if tier == names.TIER_REPETITION and verdict.similarity is not None:
            part += f" (similarity {verdict.similarity:.2f})"
        parts.append(part)
    return "; ".join(parts)


def _quiet_on_error(self: FabricationGuard, reply: Any = "", tools_fired: Any = (),
                    *args: Any, **kwargs: Any) -> FabricationVerdict:
    # The fallback of `guarded`: the agent gets its reply back untouched.
    try:
        tools = dedupe_names(tools_fired or ())
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


def _nothing(*_args: Any, **_kwargs: Any) -> None:
    return None


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
              agent: str | None = None, response_id: str | None = None) -> FabricationVerdict:
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
            response_id: The model response the reply came from (``gen_ai.response.id``
                of the evaluation), when known.

        Returns:
            The verdict; ``verdict.reply`` is what to show the user.
        """
        started = time.perf_counter()
        rid = storable_request_id(request_id or new_request_id())
        try:
            tools = dedupe_names(tools_fired)
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
        except Exception as exc:
            # Reported as an evaluation that could not decide; `guarded` counts it and
            # gives the reply back unchanged.
            self._telemetry.evaluation_failed(names.EVALUATION_FABRICATION, rid, exc,
                                              response_id=response_id)
            raise
        self._report(verdict, channel, rid, agent, response_id,
                     (time.perf_counter() - started) * 1000.0)
        return verdict

    @guarded(_quiet_conversation)
    def check_conversation(self, messages: Sequence[Any], tools: Any = None, *,
                           system: Any = None, channel: str | None = None,
                           request_id: str | None = None, agent: str | None = None,
                           response_id: str | None = None) -> FabricationVerdict:
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
            response_id: The model response of the judged reply (``gen_ai.response.id``
                of the evaluation), when known.

        Returns:
            The verdict on the last assistant reply with text (``msg_index`` set); an
            unflagged empty verdict (and no evaluation) when there is none.
        """
        started = time.perf_counter()
        rid = storable_request_id(request_id or new_request_id())
        try:
            verdict = self.detector.detect_last(messages, tools, system=system)
        except Exception as exc:
            # Reported as an evaluation that could not decide; `guarded` counts it and
            # gives the reply back unchanged.
            self._telemetry.evaluation_failed(names.EVALUATION_FABRICATION, rid, exc,
                                              response_id=response_id)
            raise
        if verdict is None:
            return FabricationVerdict.quiet("")
        self._report(verdict, channel, rid, agent, response_id,
                     (time.perf_counter() - started) * 1000.0)
        return verdict

    # Guarded on its own: the verdict is decided, and telemetry must not change it.
    @guarded(_nothing)
    def _report(self, verdict: FabricationVerdict, channel: str | None, request_id: str,
                agent: str | None, response_id: str | None, duration_ms: float) -> None:
        """The verdict's telemetry: the detection when flagged, and the evaluation."""
        if not verdict.flagged:
            self._telemetry.evaluation(names.EVALUATION_FABRICATION, request_id, passed=True,
                                       explanation=_PASS_EXPLANATION, response_id=response_id)
            return
        with self._telemetry.verdict_span(request_id):
            self._emit(verdict, channel, request_id, agent, duration_ms)
            self._telemetry.evaluation(names.EVALUATION_FABRICATION, request_id,
                                       passed=False, explanation=_fail_explanation(verdict),
                                       response_id=response_id)

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
