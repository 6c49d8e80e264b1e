"""What one request's stored telemetry tells, read for the request page: its LLM
exchanges as conversations, each plan loop with its rejected and recovered plans, each
flagged reply with its marks, each forced verification, and every evaluation verdict.

:func:`read_story` reads a request's trace and payloads (:mod:`guardtrace.store.queries`)
through the pure readers beside it (:mod:`.exchange`, :mod:`.plan_story`,
:mod:`.reply_marks`); :mod:`.request_story` draws what it returns. Nothing here raises on
what the store holds: a payload that cannot be read is listed with why, to be shown raw.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from opentelemetry.semconv.attributes.error_attributes import ERROR_TYPE

from guardtrace.dashboard.views.event_values import found_in
from guardtrace.dashboard.views.exchange import (
    Conversation,
    Unreadable,
    read_payload_exchange,
    read_span_exchange,
)
from guardtrace.dashboard.views.plan_story import PlanStory, plan_stories
from guardtrace.dashboard.views.reply_marks import FabricationStory, fabrication_stories
from guardtrace.schemas import names
from guardtrace.schemas.genai_exchange import GENAI_RESPONSE_ID
from guardtrace.store.queries import Payload, Trace, TraceEvent, TraceSpan

__all__ = [
    "Evaluation",
    "ExchangeView",
    "RequestStory",
    "VerificationStory",
    "read_story",
]

# A verification payload's counts, in the order shown, with the page's words for them.
_VERIFICATION_COUNTS: Final = (
    ("turns_used", "turns used"), ("tool_calls_used", "verifying tool calls"),
    ("min_tool_calls", "verifying tool calls required"),
    ("other_tool_calls", "other tool calls"),
    ("nudges", "nudges"))
_DECISION_FIELDS: Final = (
    ("depth", "depth"), ("score", "criticality score"),
    ("trigger_pattern", "trigger pattern"), ("family", "pattern family"))


@dataclass(frozen=True)
class ExchangeView:
    """One LLM call of the request, as recorded.

    Attributes:
        at: When it was recorded (the payload's time, the span's start).
        conversation: The conversation, or why the record cannot be read as one.
        payload: The ``llm_exchange`` payload it was read from, if one.
        span: The LLM span it was read from, if one.
    """

    at: datetime
    conversation: Conversation | Unreadable
    payload: Payload | None = None
    span: TraceSpan | None = None


@dataclass(frozen=True)
class VerificationStory:
    """A hallucination-prone question through forced verification.

    Attributes:
        question: The question.
        outcome: ``completed``, ``bypassed``, ...
        reason: Why it ended so.
        facts: The gate's decision and the loop's counts, as (what, value) pairs.
    """

    question: str
    outcome: str
    reason: str
    facts: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Evaluation:
    """One ``gen_ai.evaluation.result`` event: a guard's verdict, pass or fail."""

    at: datetime
    name: str
    label: str
    score: str
    explanation: str
    response_id: str
    found_in: str
    error_type: str


@dataclass(frozen=True)
class RequestStory:
    """Everything :func:`read_story` found, each part oldest first.

    Attributes:
        exchanges: The LLM calls recorded (payloads, then LLM spans).
        plans: Plan loops with invented tools.
        fabrications: Replies the fabrication guard flagged.
        verifications: Questions through forced verification.
        evaluations: Every verdict, pass or fail.
        pipeline_findings: Guard and evaluation events the pipeline made.
        unreadable: Guard payloads that could not be read, with why.
    """

    exchanges: tuple[ExchangeView, ...] = ()
    plans: tuple[PlanStory, ...] = ()
    fabrications: tuple[FabricationStory, ...] = ()
    verifications: tuple[VerificationStory, ...] = ()
    evaluations: tuple[Evaluation, ...] = ()
    pipeline_findings: tuple[TraceEvent, ...] = ()
    unreadable: tuple[tuple[Payload, str], ...] = ()


def read_story(trace: Trace, payloads: Sequence[Payload]) -> RequestStory:
    """The story of one request (see the module docstring); never raises on stored data.

    Args:
        trace: The request's spans and events.
        payloads: Its debug payloads, in time order.
    """
    complete = [p for p in payloads if p.complete]
    unreadable = [(p, f"Incomplete: {p.chunks_present} of {p.chunk_count} chunks have "
                      "arrived.") for p in payloads if not p.complete
                  and p.kind != names.PAYLOAD_KIND_LLM_EXCHANGE]
    exchanges = [ExchangeView(p.timestamp, read_payload_exchange(p.body)
                              if p.complete else Unreadable(
                                  f"Incomplete: {p.chunks_present} of {p.chunk_count} "
                                  "chunks have arrived."), payload=p)
                 for p in payloads if p.kind == names.PAYLOAD_KIND_LLM_EXCHANGE]
    spoken: dict[str, Conversation] = {}
    for span in trace.spans:
        conversation = read_span_exchange(span.attributes)
        if conversation is None:
            continue
        exchanges.append(ExchangeView(span.start_time, conversation, span=span))
        if isinstance(conversation, Conversation):
            spoken[span.span_id] = conversation
    plans, unread_plans = plan_stories(trace.events, complete, spoken)
    fabrications, unread_replies = fabrication_stories(trace.events, complete, spoken)
    verifications = []
    for payload in complete:
        if payload.kind == names.PAYLOAD_KIND_VERIFICATION:
            story = _verification(payload.body)
            if isinstance(story, str):
                unreadable.append((payload, story))
            else:
                verifications.append(story)
    return RequestStory(
        exchanges=tuple(exchanges), plans=plans, fabrications=fabrications,
        verifications=tuple(verifications),
        evaluations=tuple(_evaluation(e) for e in trace.events
                          if e.name == names.EVENT_EVALUATION_RESULT),
        pipeline_findings=tuple(e for e in trace.events
                                if found_in(e) == names.FOUND_IN_PIPELINE),
        unreadable=(*unreadable, *unread_plans, *unread_replies))


def _verification(body: str) -> VerificationStory | str:
    """The verification a payload records, or why it records none."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return "The body is not valid JSON (a body cut at the collector's payload limit is not)."
    if not isinstance(data, dict) or not isinstance(data.get("question"), str):
        return "The body has no 'question': it is not a verification."
    decision = data["decision"] if isinstance(data.get("decision"), dict) else {}
    facts = [(label, _text(decision[key])) for key, label in _DECISION_FIELDS
             if decision.get(key) is not None]
    facts += [(label, _text(data[key])) for key, label in _VERIFICATION_COUNTS
              if data.get(key) is not None]
    return VerificationStory(data["question"], _text(data.get("outcome", "")),
                             _text(data.get("reason", "")), tuple(facts))


def _evaluation(event: TraceEvent) -> Evaluation:
    attributes = event.attributes
    return Evaluation(
        at=event.timestamp, name=attributes.get(names.ATTR_EVALUATION_NAME, ""),
        label=attributes.get(names.ATTR_EVALUATION_SCORE_LABEL, ""),
        score=attributes.get(names.ATTR_EVALUATION_SCORE_VALUE, ""),
        explanation=attributes.get(names.ATTR_EVALUATION_EXPLANATION, ""),
        response_id=attributes.get(GENAI_RESPONSE_ID, ""), found_in=found_in(event),
        error_type=attributes.get(ERROR_TYPE, ""))


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return str(value)
