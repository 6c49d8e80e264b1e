"""The story of a plan that named tools the model was not shown: each rejected plan
against the list the model was shown, what the guard told the model before each retry,
and the plan it gave back.

Read from what the store holds: the ``hallucination_detection`` payload of each rejected
plan (prompt, plan, the allowed list, the guard's errors with suggestions), the
``llm.hallucination_*`` events (the invented names and suggestions where no payload was
captured, and the outcome), an ``llm_exchange`` payload recorded after the last rejection
(the recovered plan), and for a finding of the pipeline, the LLM span's own exchange.

What the guard told the model before retry ``k`` opens retry ``k``'s prompt (feedback
first, then the planning prompt); a retry whose plan was accepted records no payload, so
the feedback that led to a recovery is stored only when an earlier retry was rejected.

Pure and total, like :mod:`.exchange`: a payload that cannot be read is reported as such.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from guardtrace.dashboard.views.event_values import event_list, found_in
from guardtrace.dashboard.views.exchange import (
    Conversation,
    read_payload_exchange,
    read_reply,
    tool_names,
)
from guardtrace.schemas import names
from guardtrace.store.queries import Payload, TraceEvent

__all__ = [
    "OUTCOME_DETECTED",
    "PlanStep",
    "PlanStory",
    "RejectedPlan",
    "plan_steps",
    "plan_stories",
]

# No recovery, unrecoverable or failed regeneration was recorded (detection only, e.g.
# validate_plan without the retry loop, or a finding of the pipeline).
OUTCOME_DETECTED: Final = "detected"
_OUTCOMES: Final = (names.EVENT_HALLUCINATION_RECOVERED, names.EVENT_HALLUCINATION_UNRECOVERABLE,
                    names.EVENT_HALLUCINATION_REGENERATION_FAILED)
# The guard's error types that name an invented tool or capability.
_INVENTED_TYPES: Final = frozenset({"hallucinated_tool", "hallucinated_capability"})
# Keys a model response or message has (a plan given as the model's tool calls).
_RESPONSE_KEYS: Final = ("choices", "output", "content", "role", "tool_calls", "type")


@dataclass(frozen=True)
class PlanStep:
    """One step of a plan, as shown in a table.

    Attributes:
        step_id: The step's id (a call's id), or ``#N`` when it declares none.
        tool: The tool or agent it uses.
        detail: Its instruction, else its arguments as compact JSON.
        after: The steps it depends on.
    """

    step_id: str
    tool: str
    detail: str = ""
    after: tuple[str, ...] = ()


@dataclass(frozen=True)
class RejectedPlan:
    """One plan the guard rejected.

    Attributes:
        retry: 0 for the first attempt, then 1, 2, ...
        at: When it was recorded.
        steps: The plan's steps; None when the plan is not stored or cannot be read.
        shown: The tools the model was shown; None when the list is not stored.
        invented: The names it used that are not in the list.
        suggestions: Each invented name's closest listed tools, best first.
        problems: The guard's findings in its own words.
        feedback: What the guard told the model before this attempt ("" on the first
            attempt, or when the prompt is not stored in a form that shows it).
        found_in: Where the finding was made (``agent`` or ``pipeline``).
        notes: What could not be read.
    """

    retry: int
    at: datetime
    steps: tuple[PlanStep, ...] | None
    shown: tuple[str, ...] | None
    invented: tuple[str, ...]
    suggestions: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    feedback: str = ""
    found_in: str = names.FOUND_IN_AGENT
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class PlanStory:
    """One plan loop: its rejected plans, its outcome and the plan it gave back.

    Attributes:
        rejected: The rejected plans, oldest first.
        outcome: The event that ended the loop (``llm.hallucination_recovered``,
            ``..._unrecoverable``, ``..._regeneration_failed``) or
            :data:`OUTCOME_DETECTED`.
        outcome_detail: That event's attributes (retries used or exhausted, the error).
        final: The plan given back after a recovery; None when it is not stored.
    """

    rejected: tuple[RejectedPlan, ...]
    outcome: str = OUTCOME_DETECTED
    outcome_detail: Mapping[str, str] = field(default_factory=dict)
    final: tuple[PlanStep, ...] | None = None

    @property
    def recovered(self) -> bool:
        return self.outcome == names.EVENT_HALLUCINATION_RECOVERED


def plan_stories(events: Sequence[TraceEvent], payloads: Sequence[Payload],
                 span_conversations: Mapping[str, Conversation],
                 ) -> tuple[tuple[PlanStory, ...], tuple[tuple[Payload, str], ...]]:
    """Every plan loop of one request, oldest first, and the payloads that could not be read.

    Args:
        events: The request's span events, in time order.
        payloads: Its debug payloads, in time order.
        span_conversations: The exchange of each LLM span that has a readable one, by
            span id (where a pipeline finding's plan and tool list are).

    Returns:
        The loops, and each ``hallucination_detection`` payload that is no rejected plan
        this page can read, with why.
    """
    detected = [e for e in events if e.name == names.EVENT_HALLUCINATION_DETECTED]
    loops: list[list[RejectedPlan]] = []
    unread: list[tuple[Payload, str]] = []
    first_prompt = ""
    covered: set[tuple[int, str]] = set()
    for payload in payloads:
        if payload.kind != names.PAYLOAD_KIND_HALLUCINATION:
            continue
        plan, first_prompt, why = _from_payload(payload, detected, first_prompt)
        if plan is None:
            unread.append((payload, why))
            continue
        if not loops or plan.retry <= loops[-1][-1].retry:
            loops.append([])  # a first attempt: a loop of its own
        loops[-1].append(plan)
        covered.update((plan.retry, name) for name in plan.invented)
    loops.extend(_from_events([e for e in detected if (_retry(e), _invented(e)) not in covered],
                              span_conversations))
    loops.sort(key=lambda loop: loop[0].at)
    starts = [loop[0].at for loop in loops]
    ends = [*starts[1:], None]
    outcomes = [e for e in events if e.name in _OUTCOMES]
    exchanges = [p for p in payloads if p.kind == names.PAYLOAD_KIND_LLM_EXCHANGE]
    stories = []
    for index, loop in enumerate(loops):
        start, end = loop[0].at, ends[index]
        ending = next((e for e in outcomes if e.timestamp >= start
                       and (end is None or e.timestamp < end)), None)
        outcome = ending.name if ending is not None else OUTCOME_DETECTED
        final = None
        if outcome == names.EVENT_HALLUCINATION_RECOVERED:
            final = _recovered_plan([p for p in exchanges if p.timestamp >= loop[-1].at
                                     and (end is None or p.timestamp < end)])
        stories.append(PlanStory(tuple(loop), outcome,
                                 dict(ending.attributes) if ending is not None else {}, final))
    return tuple(stories), tuple(unread)


def _from_payload(payload: Payload, detected: Sequence[TraceEvent],
                  first_prompt: str) -> tuple[RejectedPlan | None, str, str]:
    """The rejected plan a payload records, the loop's first prompt, and why not."""
    try:
        body = json.loads(payload.body)
    except (ValueError, RecursionError):
        return None, first_prompt, ("The body is not valid JSON (a body cut at the "
                                    "collector's payload limit is not).")
    if not isinstance(body, dict) or not isinstance(body.get("allowed"), list):
        return None, first_prompt, "The body has no 'allowed' list: it is not a rejected plan."
    retry = _int(body.get("retry"))
    prompt = body["prompt"] if isinstance(body.get("prompt"), str) else ""
    if retry == 0:
        first_prompt = prompt
    errors = [e for e in _list(body.get("errors")) if isinstance(e, dict)]
    invented = _strings(body.get(names.ATTR_HALLUCINATED_AGENTS)) or tuple(
        e["tool"] for e in errors if e.get("error_type") in _INVENTED_TYPES
        and isinstance(e.get("tool"), str))
    suggestions = {e["tool"]: _strings(e.get("suggested_tools")) for e in errors
                   if isinstance(e.get("tool"), str) and e.get("error_type") in _INVENTED_TYPES}
    for event in detected:  # the events' suggestions, where the errors have none
        if _retry(event) == retry and not suggestions.get(_invented(event)):
            suggestions[_invented(event)] = event_list(event, names.ATTR_SUGGESTED_TOOLS)
    steps = plan_steps(body.get("response"))
    notes = () if steps is not None else ("The plan is in no shape this page reads; it is in "
                                          "the raw payload.",)
    return RejectedPlan(
        retry=retry, at=payload.timestamp, steps=steps,
        shown=tool_names(body["allowed"]), invented=invented,
        suggestions={name: tuple(s) for name, s in suggestions.items() if name in invented},
        problems=tuple(e["message"] for e in errors if isinstance(e.get("message"), str)),
        feedback=_feedback(prompt, first_prompt) if retry else "",
        found_in=next((found_in(e) for e in detected if _retry(e) == retry),
                      names.FOUND_IN_AGENT),
        notes=notes), first_prompt, ""


def _from_events(events: Sequence[TraceEvent],
                 span_conversations: Mapping[str, Conversation]) -> list[list[RejectedPlan]]:
    """Rejected plans known only from their events (no payload captured, or a finding of
    the pipeline): one per span and retry, one loop per span."""
    grouped: dict[str, dict[int, list[TraceEvent]]] = {}
    for event in events:
        grouped.setdefault(event.span_id, {}).setdefault(_retry(event), []).append(event)
    loops = []
    for span_id, retries in grouped.items():
        conversation = span_conversations.get(span_id)
        loop = []
        for retry, found in sorted(retries.items()):
            steps = None
            if conversation is not None:
                steps = tuple(PlanStep(c.call_id or f"#{n}", c.name, _compact(c.arguments))
                              for n, c in enumerate(conversation.reply_calls, start=1))
            invented = tuple(dict.fromkeys(_invented(e) for e in found))
            loop.append(RejectedPlan(
                retry=retry, at=found[0].timestamp, steps=steps,
                shown=conversation.tools if conversation is not None else None,
                invented=invented,
                suggestions={_invented(e): event_list(e, names.ATTR_SUGGESTED_TOOLS)
                             for e in found},
                found_in=found_in(found[0])))
        loops.append(loop)
    return loops


def _recovered_plan(exchanges: Sequence[Payload]) -> tuple[PlanStep, ...] | None:
    """The plan of the first exchange recorded after the last rejection, if it has one."""
    for payload in exchanges:
        conversation = read_payload_exchange(payload.body)
        if not isinstance(conversation, Conversation) or not conversation.reply:
            continue
        if conversation.reply_calls:
            return tuple(PlanStep(c.call_id or f"#{n}", c.name, _compact(c.arguments))
                         for n, c in enumerate(conversation.reply_calls, start=1))
        steps = plan_steps(conversation.reply_text)
        return steps if steps is not None else ()
    return None


def plan_steps(plan: Any) -> tuple[PlanStep, ...] | None:
    """The steps of a plan as recorded: a list of steps, ``{"steps": [...]}``, JSON text
    of either, or a model response whose tool calls are the plan; None when ``plan`` is
    none of these."""
    if isinstance(plan, str):
        try:
            plan = json.loads(plan)
        except (ValueError, RecursionError):
            return None
    if isinstance(plan, dict) and isinstance(plan.get("steps"), list):
        items = plan["steps"]
    elif isinstance(plan, list) and all(isinstance(i, dict) and ("tool" in i or "agent_name"
                                                                  in i) for i in plan):
        items = plan
    elif isinstance(plan, list) or (isinstance(plan, dict)
                                    and any(key in plan for key in _RESPONSE_KEYS)):
        calls = [c for m in read_reply(plan) for c in m.tool_calls]
        return tuple(PlanStep(c.call_id or f"#{n}", c.name, _compact(c.arguments))
                     for n, c in enumerate(calls, start=1))
    else:
        return None
    return tuple(_step(raw, n) for n, raw in enumerate(items, start=1))


def _step(raw: Any, position: int) -> PlanStep:
    if not isinstance(raw, dict):
        return PlanStep(f"#{position}", "", _compact(raw))
    tool = raw.get("tool", raw.get("agent_name"))
    step_id = raw.get("id", raw.get("step_id"))
    instruction = raw.get("instruction")
    arguments = next((raw[key] for key in ("arguments", "inputs", "input", "args",
                                           "parameters") if raw.get(key) is not None), None)
    detail = instruction if isinstance(instruction, str) and instruction else \
        _compact(arguments) if arguments is not None else ""
    after = raw.get("depends_on")
    return PlanStep(
        str(step_id) if isinstance(step_id, (str, int)) and not isinstance(step_id, bool)
        else f"#{position}",
        tool if isinstance(tool, str) else _compact(tool), detail,
        tuple(str(a) for a in after) if isinstance(after, list) else
        (str(after),) if isinstance(after, (str, int)) else ())


def _feedback(prompt: str, first_prompt: str) -> str:
    """The feedback that opens a retry's prompt: what precedes the planning prompt (the
    first attempt's prompt, or its first line: a retry's request may carry a hint)."""
    for opening in (first_prompt, first_prompt.partition("\n")[0]):
        at = prompt.find("\n\n" + opening) if opening.strip() else -1
        if at > 0:
            return prompt[:at]
    return ""


def _invented(event: TraceEvent) -> str:
    return event.attributes.get(names.ATTR_HALLUCINATED_AGENT) or event.agent


def _retry(event: TraceEvent) -> int:
    return _int(event.attributes.get(names.ATTR_HALL_RETRY))


def _int(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) < 7:
        return int(value)
    return 0


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def _compact(value: Any) -> str:
    """A value as one line of JSON (JSON text is parsed and written again)."""
    if isinstance(value, str):
        if value.lstrip()[:1] not in ("{", "["):
            return value
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return " ".join(value.split())
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return str(value)
