"""Validate an LLM-generated plan against the exact tool list the planner was shown.

Family 1 of the guards (seeds 002 and 003). A plan step that names a tool, agent or
capability the planner was not given is a hallucination; dependency mistakes (missing,
forward, self, cycles) make a plan unexecutable too. Validation is deterministic code,
not an LLM judgement, so a prompt cannot talk its way past it.

The plan forms read (orchestrator steps, and the tool calls a model made in OpenAI,
Responses, Anthropic or bare shapes) are described in
:mod:`guardtrace.collectors.plans.plan_shapes`; the findings' types in
:mod:`guardtrace.collectors.plans.findings`.

Accepted ``allowed`` forms (tool names, agent -> capabilities mappings, tool definitions
in every shape :mod:`guardtrace.collectors.tool_catalog` reads, the planner's capability
text, or a parsed :class:`AllowedTools`) are described in
:mod:`guardtrace.collectors.plans.allowed_tools`; name suggestions for invented tools come
from :mod:`guardtrace.collectors.plans.suggestions`, weighing the step's arguments against
each tool's parameters. Both are re-exported here (:class:`AllowedTools`,
:func:`suggest_tools`).

A name that is not in the list is one of three things
(:func:`~guardtrace.collectors.plans.suggestions.classify_unknown_name`):

* an **abstention** (``no_function``, ``out_of_domain``, ``None``): the planner said no
  tool applies. It is reported as ``abstention``, not as a hallucination: the plan
  cannot run as written, but nothing was invented. A zero-step plan is the way to say it.
* a **placeholder** (``func1``, ``tools.call``, ``python`` when no such tool is listed):
  a ``hallucinated_tool`` with ``placeholder`` set and no suggestion, since any would be
  a guess.
* an invented or misspelt tool: a ``hallucinated_tool`` with suggestions.

Telemetry: :func:`validate_plan` emits its own detection (span event
``llm.hallucination_detected`` per distinct invented name, the capped counter
``plan_generation.hallucinations{agent}``, one WARN log line), through the planning
module's :class:`~guardtrace.collectors.emit.telemetry.GuardTelemetry`. The retry loop
(:mod:`guardtrace.collectors.plans.retry`) validates with ``emit=False`` and reports the
same detection itself, with its retry count, through :func:`report_hallucinations`, so
nothing is emitted twice.

Every validation that emits is also one ``gen_ai.evaluation.result`` event named
``guardtrace.plan_tools``: ``fail`` when the plan invents a tool, agent or capability
(emitted with the detection, on its span; the explanation names each invented name with
the closest allowed names), ``pass`` otherwise (:func:`report_pass`). Dependency
mistakes and abstentions invent nothing, so they pass this evaluation (the result still
says the plan cannot run). A plan that cannot be read is an evaluation with
``error.type`` and no score (:func:`report_unevaluated`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from ...schemas import names
from ...schemas.request_ids import storable_request_id
from ..emit.telemetry import GuardTelemetry, guarded, new_request_id
from .allowed_tools import AllowedTools, suggest_tools
from .findings import PlanErrorType, PlanIssue, PlanValidationResult, shown_name
from .plan_shapes import PlanStep, find_cycles, parse_plan
from .suggestions import (
    ABSTENTION,
    MAX_SUGGESTIONS,
    PLACEHOLDER,
    classify_unknown_name,
)

__all__ = [
    "OPERATION",
    "PLANNING_TELEMETRY",
    "AllowedTools",
    "PlanErrorType",
    "PlanIssue",
    "PlanStep",
    "PlanValidationResult",
    "report_hallucinations",
    "report_pass",
    "report_unevaluated",
    "suggest_tools",
    "validate_plan",
]

#: The ``operation`` of plan-validation telemetry (log lines, the span of its own).
OPERATION = "hallucination_detection"
#: Where plan validation and the retry loop emit unless given another telemetry.
PLANNING_TELEMETRY = GuardTelemetry(names.MODULE_PLANNING, OPERATION)
#: Value of the log ``status`` field for a detection.
STATUS_DETECTED = "detected"
# The explanation of a plan_tools evaluation that found nothing invented.
_PASS_EXPLANATION = "every tool, agent and capability the plan names is in the allowed list"


def _listing(items: Sequence[str], limit: int = 10) -> str:
    shown = ", ".join(shown_name(item) for item in items[:limit])
    return f"{shown}, … ({len(items) - limit} more)" if len(items) > limit else shown


def _unknown_tool_issue(step: PlanStep, catalog: AllowedTools) -> PlanIssue:
    """The finding for a step whose tool is not in the list: an abstention, a
    placeholder, or an invented tool with the closest allowed names."""
    sid, tool = shown_name(step.step_id), step.tool
    allowed = f"{catalog.agent_count} allowed: {_listing(catalog.names)}"
    kind = classify_unknown_name(tool)
    if kind == ABSTENTION:
        return PlanIssue(
            PlanErrorType.ABSTENTION, sid, tool,
            f"Step '{sid}' answers '{shown_name(tool)}', which says no tool applies rather than "
            f"naming one ({allowed}). If no allowed tool fits the request, the plan should "
            f"have zero steps.", capability=step.capability)
    if kind == PLACEHOLDER:
        return PlanIssue(
            PlanErrorType.HALLUCINATED_TOOL, sid, tool,
            f"Step '{sid}' uses '{shown_name(tool)}', a placeholder rather than the name of a tool; it "
            f"is not in the allowed list ({allowed}).",
            capability=step.capability, placeholder=True)
    suggestions = catalog.suggest(tool, arguments=step.arguments)
    message = (f"Step '{sid}' uses '{shown_name(tool)}', which is not in the allowed list "
               f"({allowed}).")
    if suggestions:
        message += f" Closest allowed: {', '.join(suggestions)}."
    return PlanIssue(PlanErrorType.HALLUCINATED_TOOL, sid, tool, message, suggestions,
                     capability=step.capability)


# --- telemetry ---------------------------------------------------------------------------

def _skip(*_args: Any, **_kwargs: Any) -> None:
    return None


@guarded(_skip)
def report_hallucinations(result: PlanValidationResult, *, request_id: str,
                          telemetry: GuardTelemetry | None = None, retry: int | None = None,
                          max_retries: int | None = None,
                          duration_ms: float | None = None,
                          response_id: str | None = None) -> None:
    """Emit one plan's hallucination detection: a span event and a count per distinct
    invented name, one WARN log line, and the plan's ``guardtrace.plan_tools`` fail
    evaluation, the events on one span. Never raises; emits nothing for a result without
    hallucinations (:func:`report_pass` reports those).

    :func:`validate_plan` calls it for every detection; the retry loop, which validates
    with ``emit=False``, calls it with the retry count instead.

    Args:
        result: A validation result.
        request_id: The request the plan belongs to (first attribute of the event).
        telemetry: Where to emit; :data:`PLANNING_TELEMETRY` when None.
        retry: Retries that preceded this plan (``hall_retry``), when in a retry loop.
        max_retries: The retry budget (``max_hall_retries``), when in a retry loop.
        duration_ms: Time spent so far, for the log line.
        response_id: The model response the plan came from, when known.
    """
    if not result.hallucinations:
        return
    t = telemetry or PLANNING_TELEMETRY
    with t.verdict_span(request_id):
        _emit_detection(result, request_id, t, retry, max_retries, duration_ms)
        t.evaluation(names.EVALUATION_PLAN_TOOLS, request_id, passed=False,
                     explanation=_fail_explanation(result), response_id=response_id)


def _emit_detection(result: PlanValidationResult, request_id: str, t: GuardTelemetry,
                    retry: int | None, max_retries: int | None,
                    duration_ms: float | None) -> None:
    catalog = result.allowed
    first_per_name: dict[str | None, PlanIssue] = {}
    for issue in result.hallucinations:
        first_per_name.setdefault(issue.tool, issue)
    for issue in first_per_name.values():
        capability = (issue.capability
                      if issue.error_type is PlanErrorType.HALLUCINATED_CAPABILITY else None)
        shown = None if issue.tool is None else shown_name(issue.tool)
        t.event(names.EVENT_HALLUCINATION_DETECTED, request_id, {
            names.ATTR_HALLUCINATED_AGENT: shown,
            names.ATTR_AGENT: shown,
            names.ATTR_HALLUCINATED_CAPABILITY: capability,
            names.ATTR_ALLOWED_AGENT_COUNT: catalog.agent_count,
            names.ATTR_HALL_RETRY: retry,
            names.ATTR_MAX_HALL_RETRIES: max_retries,
            names.ATTR_SUGGESTED_TOOLS: list(issue.suggested_tools),
            names.ATTR_ERROR_TYPE: str(issue.error_type),
        })
        t.count(names.METRIC_HALLUCINATIONS, agent=shown)
    hallucinated = [shown_name(name) for name in result.hallucinated_names]
    fields: dict[str, Any] = {
        names.ATTR_HALLUCINATED_AGENT: hallucinated[0] if hallucinated else None,
        names.ATTR_HALLUCINATED_AGENTS: hallucinated,
        names.ATTR_ALLOWED_AGENTS: [shown_name(name) for name in catalog.names],
    }
    if retry is not None:
        fields[names.ATTR_HALL_RETRY] = retry
    if max_retries is not None:
        fields[names.ATTR_MAX_HALL_RETRIES] = max_retries
    t.log(logging.WARNING, "LLM planner hallucinated a tool not in its allowed list",
          request_id=request_id, status=STATUS_DETECTED,
          error="; ".join(e.message for e in result.hallucinations),
          duration_ms=duration_ms, **fields)


def _fail_explanation(result: PlanValidationResult) -> str:
    """The evidence: each invented name once, with the closest allowed names."""
    count = result.allowed.agent_count
    parts: list[str] = []
    seen: set[tuple[str | None, str | None]] = set()
    for issue in result.hallucinations:
        capability = (issue.capability
                      if issue.error_type is PlanErrorType.HALLUCINATED_CAPABILITY else None)
        if (issue.tool, capability) in seen:
            continue
        seen.add((issue.tool, capability))
        shown = shown_name(issue.tool or "")
        if capability is not None:
            part = f"'{shown}' has no capability '{shown_name(capability)}'"
        elif issue.placeholder:
            part = f"'{shown}' is a placeholder, not one of the {count} allowed tools"
        else:
            part = f"'{shown}' is not one of the {count} allowed tools"
        if issue.suggested_tools:
            part += f" (closest: {', '.join(issue.suggested_tools)})"
        parts.append(part)
    return "; ".join(parts)


@guarded(_skip)
def report_pass(*, request_id: str, telemetry: GuardTelemetry | None = None,
                response_id: str | None = None) -> None:
    """Emit the ``guardtrace.plan_tools`` pass of a plan that invents nothing; never
    raises.

    :func:`validate_plan` calls it for every such plan; the retry loops, which validate
    with ``emit=False``, call it for each such plan they validate (a fail is emitted
    with its detection, by :func:`report_hallucinations`).

    Args:
        request_id: The request the plan belongs to.
        telemetry: Where to emit; :data:`PLANNING_TELEMETRY` when None.
        response_id: The model response the plan came from, when known.
    """
    (telemetry or PLANNING_TELEMETRY).evaluation(
        names.EVALUATION_PLAN_TOOLS, request_id, passed=True, explanation=_PASS_EXPLANATION,
        response_id=response_id)


@guarded(_skip)
def report_unevaluated(error: BaseException, *, request_id: str,
                       telemetry: GuardTelemetry | None = None,
                       response_id: str | None = None) -> None:
    """Emit the ``guardtrace.plan_tools`` evaluation of a plan that could not be
    validated (``error.type``, no score); never raises."""
    (telemetry or PLANNING_TELEMETRY).evaluation_failed(
        names.EVALUATION_PLAN_TOOLS, request_id, error, response_id=response_id)


def validate_plan(plan: Any, allowed: Any, *, request_id: str | None = None,
                  telemetry: GuardTelemetry | None = None, emit: bool = True,
                  response_id: str | None = None) -> PlanValidationResult:
    """Check every step of ``plan`` against ``allowed`` and its dependency structure.

    A zero-step plan is valid: it is the sanctioned answer when no allowed tool fits.
    When the plan names a tool, agent or capability it was not given, the detection is
    emitted (see the module docstring) unless ``emit`` is False; every validation that
    emits is also one ``guardtrace.plan_tools`` evaluation result, pass or fail. A
    failure to emit never changes the result.

    Args:
        plan: A list of steps, an orchestrator plan object, tool calls or a model
            response or message holding them (see
            :mod:`~guardtrace.collectors.plans.plan_shapes`), or a JSON string of any of these.
        allowed: The exact tools/agents the planner was shown, in any accepted form
            (see :mod:`guardtrace.collectors.plans.allowed_tools`), or an
            :class:`AllowedTools`.
        request_id: The request id of the emitted telemetry; the current trace id or a
            random id when None.
        telemetry: Where to emit; the planning module's telemetry when None.
        emit: False to emit nothing (the retry loop reports detections itself; offline
            scans measure rather than observe).
        response_id: The model response the plan came from (``gen_ai.response.id`` of
            the evaluation), when known.

    Returns:
        The result; ``result.valid`` is False when there is any finding.

    Raises:
        GuardInputError: ``plan`` or ``allowed`` cannot be interpreted; the message says
            what and where, e.g. ``"plan step 2: missing 'tool' (or 'agent_name')"``.
    """
    if not emit:
        return _check(parse_plan(plan), AllowedTools.parse(allowed))
    started = time.perf_counter()
    rid = storable_request_id(request_id or new_request_id())
    try:
        result = _check(parse_plan(plan), AllowedTools.parse(allowed))
    except Exception as exc:
        report_unevaluated(exc, request_id=rid, telemetry=telemetry, response_id=response_id)
        raise
    if result.hallucinations:
        report_hallucinations(result, request_id=rid, telemetry=telemetry,
                              duration_ms=(time.perf_counter() - started) * 1000.0,
                              response_id=response_id)
    else:
        report_pass(request_id=rid, telemetry=telemetry, response_id=response_id)
    return result


def _check(steps: list[PlanStep], catalog: AllowedTools) -> PlanValidationResult:
    if not steps:
        return PlanValidationResult((), (), catalog)

    first: dict[str, PlanStep] = {}
    for step in steps:
        first.setdefault(step.step_id, step)
    edges: dict[str, list[str]] = {}
    for step in steps:
        targets = edges.setdefault(step.step_id, [])
        targets.extend(d for d in step.depends_on
                       if d != step.step_id and d in first and d not in targets)
    cycles = find_cycles(list(first), edges)
    # A cycle always contains an edge to a later step; the cycle finding already says
    # the plan cannot run, so its edges are not reported again as forward dependencies.
    cycle_edges = {(c[i], c[i + 1]) for c in cycles for i in range(len(c) - 1)}

    errors: list[PlanIssue] = []
    for step in steps:
        sid, tool = step.step_id, step.tool
        owner = first[sid]
        if owner is not step:
            errors.append(PlanIssue(
                PlanErrorType.DUPLICATE_STEP_ID, sid, tool,
                f"Step id '{sid}' is used by steps {owner.position} and {step.position}; "
                f"step ids must be unique."))
        entry, implied = catalog.resolve(tool)
        if entry is None:
            errors.append(_unknown_tool_issue(step, catalog))
        else:
            capability = step.capability or implied
            if (capability and entry.capabilities is not None
                    and capability not in entry.capabilities):
                suggestions = catalog.capability_index(entry).rank(
                    capability, MAX_SUGGESTIONS)
                offers = _listing(entry.capabilities) or "no capabilities"
                message = (f"Step '{sid}' asks '{entry.name}' for capability "
                           f"'{capability}', which it does not offer (it offers: {offers}).")
                if suggestions:
                    message += f" Closest: {', '.join(suggestions)}."
                errors.append(PlanIssue(PlanErrorType.HALLUCINATED_CAPABILITY, sid,
                                        entry.name, message, suggestions,
                                        capability=capability))
        for dep in step.depends_on:
            if dep == sid:
                errors.append(PlanIssue(PlanErrorType.SELF_DEPENDENCY, sid, tool,
                                        f"Step '{sid}' depends on itself."))
            elif dep not in first:
                errors.append(PlanIssue(
                    PlanErrorType.MISSING_DEPENDENCY, sid, tool,
                    f"Step '{sid}' depends on '{dep}', which is not a step of this plan."))
            elif first[dep].position > step.position and (sid, dep) not in cycle_edges:
                errors.append(PlanIssue(
                    PlanErrorType.FORWARD_DEPENDENCY, sid, tool,
                    f"Step '{sid}' depends on '{dep}', which comes later in the plan; a "
                    f"step may depend only on earlier steps."))
    for cycle in cycles:
        errors.append(PlanIssue(
            PlanErrorType.DEPENDENCY_CYCLE, cycle[0], first[cycle[0]].tool,
            f"Dependency cycle: {' -> '.join(cycle)}; no step of it can run first.",
            cycle=cycle))
    return PlanValidationResult(tuple(errors), tuple(steps), catalog)


# --- offline scanner ---------------------------------------------------------------------
