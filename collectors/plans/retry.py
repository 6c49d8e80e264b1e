"""Bounded plan regeneration when a planner hallucinates tools (family 1, seed 003).

The caller owns the LLM; this module owns the decision. ``generate`` is called with a
:class:`PlanAttempt`, the plan is validated against the exact allowed list of that
attempt, and on failure the plan is regenerated at most ``max_retries`` times:

1. From the failed steps (agent name, capability, instruction) a generic capability hint
   is appended to the request (no domain maps: the words the planner used are passed on).
2. With ``enhanced_retry`` and a ``reselect`` callable, tools are selected again for the
   enhanced request (the old list is kept if ``reselect`` fails).
3. Feedback that must go first in the retry prompt names each invented tool, lists the
   allowed ones, says the capability may exist under another name and that a zero-step
   plan is a valid answer; the retry asks for a lower temperature.
4. The new plan is validated against the new allowed list.

Dependency problems (missing, forward, self, cycles, duplicate ids) also make a plan
invalid and also use the retry budget: an unexecutable plan is as useless as one with
an invented tool, and the feedback names the problem so the planner can fix it. Only
hallucinations emit the ``llm.hallucination_*`` events and counters.

Outcome: a :class:`ValidatedPlan` (with ``retries_used``), or a
:class:`PlanGenerationError` subclass.

Telemetry (seed 003 names, through :class:`~guardtrace.collectors.emit.telemetry.GuardTelemetry`;
a failure there never changes the outcome):

* every validation that finds hallucinations emits ``llm.hallucination_detected`` and
  counts ``plan_generation.hallucinations{agent}`` once per distinct invented name, logs
  one WARN line (all three by
  :func:`~guardtrace.collectors.plans.validation.report_hallucinations`, the emitter
  :func:`~guardtrace.collectors.plans.validation.validate_plan` uses on its own: the loop
  validates with ``emit=False`` so nothing is emitted twice) and records one
  ``hallucination_detection`` payload. ``hall_retry`` is the number of retries that
  preceded the rejected plan (0 = the first plan), so the final, unretried detection is
  visible too;
* each retry emits ``..._regeneration_complete`` or ``..._regeneration_failed``;
* a valid plan after any hallucination emits ``llm.hallucination_recovered`` and counts
  ``plan_generation.hallucination_recovered{retries_used}``; a last plan that still
  hallucinates emits ``llm.hallucination_unrecoverable`` and counts
  ``plan_generation.hallucination_unrecoverable{agent}`` once, for its first name.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from .validation import (
    OPERATION,  # noqa: F401 - re-exported: it used to be defined here
    PLANNING_TELEMETRY,
    STATUS_DETECTED,  # noqa: F401 - re-exported: it used to be defined here
    AllowedTools,
    PlanErrorType,
    PlanIssue,
    PlanStep,
    PlanValidationResult,
    report_hallucinations,
    validate_plan,
)
from ..emit.telemetry import GuardTelemetry, guarded, new_request_id
from ...schemas import names

__all__ = [
    "GeneratedPlan",
    "PlanAttempt",
    "PlanDependencyError",
    "PlanGenerationError",
    "PlanHallucinationError",
    "PlanRegenerationError",
    "PlanRetryConfig",
    "ValidatedPlan",
    "build_enhanced_request",
    "build_retry_feedback",
    "generate_validated_plan",
]

# One telemetry for the planning module: validate_plan and the loop emit alike.
_TELEMETRY = PLANNING_TELEMETRY

# Keys of the hallucination debug payload body (besides names.ATTR_* ones).
_BODY_PROMPT = "prompt"
_BODY_RESPONSE = "response"
_BODY_ALLOWED = "allowed"
_BODY_RETRY = "retry"
_BODY_ERRORS = "errors"

# Values of the log `status` field (STATUS_DETECTED comes with validate_plan's emitter).
STATUS_INVALID = "invalid"
STATUS_RECOVERED = "recovered"
STATUS_UNRECOVERABLE = "unrecoverable"
STATUS_REGENERATION_FAILED = "regeneration_failed"
STATUS_RESELECT_FAILED = "reselect_failed"


@dataclass(frozen=True)
class PlanRetryConfig:
    """How hard to try for a valid plan.

    Attributes:
        enabled: Retry at all; when False an invalid plan fails at once.
        max_retries: Regenerations after the first plan (seed default 1).
        enhanced_retry: Append a capability hint to the request and, when a
            ``reselect`` callable is given, select tools again for it.
        retry_temperature: Temperature asked of retries (lower = more deterministic).
    """

    enabled: bool = True
    max_retries: int = 1
    enhanced_retry: bool = True
    retry_temperature: float = 0.2

    def __post_init__(self) -> None:
        if isinstance(self.max_retries, bool) or not isinstance(self.max_retries, int) \
                or self.max_retries < 0:
            raise ValueError(f"max_retries must be an integer >= 0, got {self.max_retries!r}")
        if not 0.0 <= self.retry_temperature <= 2.0:
            raise ValueError(
                f"retry_temperature must be between 0 and 2, got {self.retry_temperature!r}")

    @property
    def retry_budget(self) -> int:
        """Retries actually allowed: ``max_retries``, or 0 when disabled."""
        return self.max_retries if self.enabled else 0


@dataclass(frozen=True)
class PlanAttempt:
    """What ``generate`` is asked to produce.

    Attributes:
        request: The request to plan for; on enhanced retries it ends with a
            ``[CAPABILITY_HINT: ...]`` paragraph.
        allowed: The allowed tools for this attempt, in the form given (or returned by
            ``reselect``): show exactly these to the planner.
        temperature: None on the first attempt (use your default), the configured
            retry temperature on retries.
        retry: 0 for the first attempt, then 1, 2, ...
        feedback: Why the previous plan was rejected ("" on the first attempt). It must
            come first in the prompt: use :attr:`prompt_prefix` or :meth:`compose`.
        original_request: The caller's request, without any hint.
        previous_plan: The rejected plan, as generated (None on the first attempt).
        previous_result: Its validation result (None on the first attempt).
        catalog: ``allowed`` parsed (names, capabilities).
    """

    request: str
    allowed: Any
    temperature: float | None = None
    retry: int = 0
    feedback: str = ""
    original_request: str = ""
    previous_plan: Any = None
    previous_result: PlanValidationResult | None = field(default=None, repr=False)
    catalog: AllowedTools | None = field(default=None, repr=False, compare=False)

    @property
    def prompt_prefix(self) -> str:
        """The feedback followed by a blank line, or "" on the first attempt."""
        return f"{self.feedback}\n\n" if self.feedback else ""

    def compose(self, planning_prompt: str) -> str:
        """``planning_prompt`` with the feedback first, so the planner reads the
        rejection before the (long) tool list."""
        return self.prompt_prefix + planning_prompt

    @property
    def allowed_names(self) -> tuple[str, ...]:
        """The allowed tool/agent names of this attempt."""
        return (self.catalog or AllowedTools.parse(self.allowed)).names


@dataclass(frozen=True)
class GeneratedPlan:
    """Optional return type of ``generate``: the plan plus the prompt actually sent.

    Return the plan alone if you like; this only makes the debug payload carry the full
    prompt instead of the request and feedback guardtrace knows about.
    """

    plan: Any
    prompt: str | None = None


@dataclass(frozen=True)
class ValidatedPlan:
    """A plan that passed validation.

    Attributes:
        plan: The plan as ``generate`` returned it.
        steps: Its parsed steps (empty for the zero-step answer).
        allowed: The allowed list it was validated against; after a reselection this
            differs from the list passed in, and it is the one to execute with.
        retries_used: Regenerations it took (0 when the first plan was valid).
        request_id: The request id used in telemetry.
        validation: The validation result of the accepted plan.
    """

    plan: Any
    steps: tuple[PlanStep, ...]
    allowed: Any
    retries_used: int
    request_id: str
    validation: PlanValidationResult = field(repr=False)


class PlanGenerationError(RuntimeError):
    """No valid plan could be produced.

    Attributes:
        result: The last validation result (of the last plan that was generated).
        retries_used: Regenerations performed.
        plan: The last plan, as generated.
        request_id: The request id used in telemetry.
    """

    def __init__(self, message: str, *, result: PlanValidationResult | None,
                 retries_used: int, plan: Any = None, request_id: str = "") -> None:
        super().__init__(message)
        self.result = result
        self.retries_used = retries_used
        self.plan = plan
        self.request_id = request_id


class PlanHallucinationError(PlanGenerationError):
    """The last plan still names tools, agents or capabilities it was not given."""


class PlanDependencyError(PlanGenerationError):
    """The last plan names only allowed tools but its dependencies cannot execute."""


class PlanRegenerationError(PlanGenerationError):
    """``generate`` raised, or returned an unreadable plan, during a retry.

    The cause is chained (``__cause__``); ``result`` is the rejected plan's validation.
    """


# --- prompts -----------------------------------------------------------------------------

def _step_of(result: PlanValidationResult, issue: PlanIssue) -> PlanStep | None:
    for step in result.steps:
        if step.step_id == issue.step:
            return step
    return None


def build_enhanced_request(request: str, result: PlanValidationResult) -> str:
    """``request`` plus a capability hint describing what the invented tools were for.

    Generic on purpose: it repeats the failed steps' instruction, agent name and
    capability instead of mapping them to known tools, so a tool selector (an LLM or a
    search) can match them semantically to tools that exist, in any domain.

    Args:
        request: The original request.
        result: A validation result with hallucinations.

    Returns:
        The request, unchanged when there is nothing to describe.
    """
    parts: list[str] = []
    seen: set[tuple[str | None, str | None]] = set()
    for issue in result.hallucinations:
        step = _step_of(result, issue)
        capability = issue.capability or (step.capability if step else None)
        if (issue.tool, capability) in seen:
            continue
        seen.add((issue.tool, capability))
        bits = []
        if step is not None and step.instruction:
            bits.append(f"perform: {step.instruction.strip()}")
        if issue.tool:
            bits.append(f"agent type: {issue.tool}")
        if capability:
            bits.append(f"capability: {capability}")
        if bits:
            parts.append("; ".join(bits))
    if not parts:
        return request
    return (f"{request}\n\n[CAPABILITY_HINT: The request needs a tool that can "
            f"{' | '.join(parts)}. The planner tried to use a tool that does not exist; "
            f"include any available tools with similar capabilities in the selection.]")


def _capability_hint(result: PlanValidationResult) -> str:
    hints = []
    for issue in result.hallucinations:
        step = _step_of(result, issue)
        hint = issue.capability or (step.capability if step else None) or issue.tool
        if hint and hint not in hints:
            hints.append(hint)
    return ", ".join(f"'{h}'" for h in hints)


def build_retry_feedback(result: PlanValidationResult, allowed: Any) -> str:
    """The text that must open the retry prompt.

    It names every problem of the rejected plan (invented tools and capabilities with
    suggestions from ``allowed``, dependency errors), lists ``allowed``, says the needed
    capability may exist under another name, and permits a zero-step plan.

    Args:
        result: The rejected plan's validation result.
        allowed: The allowed list of the retry (possibly reselected), any accepted form.

    Returns:
        Plain text, without trailing blank lines.
    """
    catalog = AllowedTools.parse(allowed)
    lines = ["YOUR PREVIOUS PLAN WAS REJECTED. Problems found:"]
    for issue in result.errors:
        if issue.error_type is PlanErrorType.HALLUCINATED_TOOL:
            # Suggestions are recomputed: after a reselection the old ones may be gone.
            near = catalog.suggest(issue.tool or "")
            line = (f"- Step '{issue.step}' used '{issue.tool}', which does NOT exist: it "
                    f"is not in the allowed list.")
            if near:
                line += f" Closest allowed: {', '.join(near)}."
        elif issue.error_type is PlanErrorType.HALLUCINATED_CAPABILITY:
            line = (f"- Step '{issue.step}' asked '{issue.tool}' for capability "
                    f"'{issue.capability}', which '{issue.tool}' does NOT offer.")
            if issue.suggested_tools:
                line += f" Closest: {', '.join(issue.suggested_tools)}."
        else:
            line = f"- {issue.message}"
        lines.append(line)
    rules = [
        "Use ONLY the tools listed under \"Allowed tools\" below, spelled exactly as "
        "listed.",
        "Do not invent, guess or rename tools, agents or capabilities.",
    ]
    if result.hallucinations:
        rules.append(f"The capability you were trying to use ({_capability_hint(result)}) "
                     f"may be available under a DIFFERENT name: check the list carefully.")
    if any(not issue.is_hallucination for issue in result.errors):
        rules.append("Give every step a unique id; a step may depend only on earlier "
                     "steps of the same plan, never on itself, and never in a cycle.")
    rules.append("If no allowed tool can fulfil the request, return a plan with ZERO "
                 "steps (an empty steps list); that is a valid answer.")
    lines.append("")
    lines.append("Rules for this retry:")
    lines.extend(f"{i}. {rule}" for i, rule in enumerate(rules, start=1))
    lines.append("")
    if len(catalog):
        lines.append(f"Allowed tools ({catalog.agent_count}):")
        lines.extend(f"- {line}" for line in catalog.describe())
    else:
        lines.append("Allowed tools: none.")
    return "\n".join(lines)


# --- telemetry ---------------------------------------------------------------------------

def _skip(*_args: Any, **_kwargs: Any) -> None:
    return None


class _Reporter:
    """All telemetry of one run. Every method is guarded: telemetry cannot change the
    outcome, even with a custom ``GuardTelemetry`` that raises."""

    def __init__(self, telemetry: GuardTelemetry, request_id: str, budget: int) -> None:
        self.t = telemetry
        self.request_id = request_id
        self.budget = budget
        self.start = time.perf_counter()

    def ms(self) -> float:
        return (time.perf_counter() - self.start) * 1000.0

    @guarded(_skip)
    def detected(self, result: PlanValidationResult, attempt: PlanAttempt, plan: Any,
                 prompt: str | None) -> None:
        catalog = result.allowed
        report_hallucinations(result, request_id=self.request_id, telemetry=self.t,
                              retry=attempt.retry, max_retries=self.budget,
                              duration_ms=self.ms())
        hallucinated = list(result.hallucinated_names)
        self.t.payload(self.request_id, names.PAYLOAD_KIND_HALLUCINATION, {
            _BODY_PROMPT: prompt if prompt is not None else attempt.compose(attempt.request),
            _BODY_RESPONSE: plan,
            _BODY_ALLOWED: list(catalog.names),
            names.ATTR_HALLUCINATED_AGENT: hallucinated[0],
            names.ATTR_HALLUCINATED_AGENTS: hallucinated,
            _BODY_RETRY: attempt.retry,
            _BODY_ERRORS: [e.to_dict() for e in result.errors],
        }, **{names.ATTR_HALLUCINATED_AGENT: hallucinated[0],
              names.ATTR_HALL_RETRY: str(attempt.retry)})

    @guarded(_skip)
    def invalid(self, result: PlanValidationResult, attempt: PlanAttempt) -> None:
        self.t.log(logging.WARNING, "LLM planner produced a plan with invalid dependencies",
                   request_id=self.request_id, status=STATUS_INVALID,
                   error="; ".join(e.message for e in result.errors),
                   duration_ms=self.ms(),
                   **{names.ATTR_ERROR_TYPE: sorted({str(e.error_type) for e in result.errors}),
                      names.ATTR_HALL_RETRY: attempt.retry,
                      names.ATTR_MAX_HALL_RETRIES: self.budget})

    @guarded(_skip)
    def reselect_failed(self, exc: BaseException, retry: int) -> None:
        self.t.log(logging.WARNING, "Tool reselection failed; retrying with the previous "
                   "allowed list", request_id=self.request_id, status=STATUS_RESELECT_FAILED,
                   error=f"{type(exc).__name__}: {exc}", duration_ms=self.ms(),
                   **{names.ATTR_HALL_RETRY: retry})

    @guarded(_skip)
    def retrying(self, attempt: PlanAttempt, previous: AllowedTools) -> None:
        self.t.log(logging.DEBUG, "Retrying plan generation", request_id=self.request_id,
                   duration_ms=self.ms(), original_tool_count=previous.agent_count,
                   new_tool_count=len(attempt.allowed_names),
                   **{names.ATTR_HALL_RETRY: attempt.retry})

    @guarded(_skip)
    def regeneration_complete(self, retry: int) -> None:
        self.t.event(names.EVENT_HALLUCINATION_REGENERATION_COMPLETE, self.request_id,
                     {names.ATTR_HALL_RETRY: retry})

    @guarded(_skip)
    def regeneration_failed(self, exc: BaseException, retry: int,
                            hallucinated: tuple[str, ...]) -> None:
        error = f"{type(exc).__name__}: {exc}"
        first = hallucinated[0] if hallucinated else None
        self.t.event(names.EVENT_HALLUCINATION_REGENERATION_FAILED, self.request_id, {
            names.ATTR_ERROR: error,
            names.ATTR_HALL_RETRY: retry,
            names.ATTR_HALLUCINATED_AGENT: first,
            names.ATTR_AGENT: first,
        })
        self.t.log(logging.ERROR, "Plan regeneration failed during hallucination retry",
                   request_id=self.request_id, status=STATUS_REGENERATION_FAILED,
                   error=error, duration_ms=self.ms(),
                   **{names.ATTR_HALL_RETRY: retry, names.ATTR_MAX_HALL_RETRIES: self.budget})

    @guarded(_skip)
    def recovered(self, retries_used: int) -> None:
        self.t.event(names.EVENT_HALLUCINATION_RECOVERED, self.request_id,
                     {names.ATTR_RETRIES_USED: retries_used})
        self.t.count(names.METRIC_HALLUCINATION_RECOVERED,
                     labels={names.ATTR_RETRIES_USED: str(retries_used)})
        self.t.log(logging.INFO, "LLM planner hallucination recovered after retry",
                   request_id=self.request_id, status=STATUS_RECOVERED,
                   duration_ms=self.ms(), **{names.ATTR_RETRIES_USED: retries_used})

    @guarded(_skip)
    def unrecoverable(self, result: PlanValidationResult, retries: int, error: str) -> None:
        issue = result.hallucinations[0]
        self.t.event(names.EVENT_HALLUCINATION_UNRECOVERABLE, self.request_id, {
            names.ATTR_HALLUCINATED_AGENT: issue.tool,
            names.ATTR_AGENT: issue.tool,
            names.ATTR_RETRIES_EXHAUSTED: retries,
            names.ATTR_ERROR_TYPE: str(issue.error_type),
        })
        self.t.count(names.METRIC_HALLUCINATION_UNRECOVERABLE, agent=issue.tool)
        self.t.log(logging.ERROR, "LLM planner hallucination unrecoverable after retries",
                   request_id=self.request_id, status=STATUS_UNRECOVERABLE, error=error,
                   duration_ms=self.ms(),
                   **{names.ATTR_HALLUCINATED_AGENT: issue.tool,
                      names.ATTR_HALLUCINATED_AGENTS: list(result.hallucinated_names),
                      names.ATTR_RETRIES_EXHAUSTED: retries})

    @guarded(_skip)
    def dependency_failure(self, retries: int, error: str) -> None:
        self.t.log(logging.ERROR, "LLM planner produced no executable plan",
                   request_id=self.request_id, status=STATUS_INVALID, error=error,
                   duration_ms=self.ms(), **{names.ATTR_RETRIES_EXHAUSTED: retries})


# --- the loop ----------------------------------------------------------------------------

PlanGenerator = Callable[[PlanAttempt], Any]
"""``generate(attempt) -> plan`` (any accepted plan form, or a :class:`GeneratedPlan`)."""
Reselector = Callable[[str], Any]
"""``reselect(enhanced_request) -> allowed`` (any accepted allowed form)."""


def _unwrap(output: Any) -> tuple[Any, str | None]:
    if isinstance(output, GeneratedPlan):
        return output.plan, output.prompt
    return output, None


def _retries(n: int) -> str:
    return f"{n} {'retry' if n == 1 else 'retries'}"


def _hallucination_message(result: PlanValidationResult, retries: int,
                           config: PlanRetryConfig) -> str:
    what = []
    for issue in result.hallucinations:
        if issue.error_type is PlanErrorType.HALLUCINATED_CAPABILITY:
            what.append(f"capability '{issue.capability}' of '{issue.tool}' "
                        f"(step '{issue.step}')")
        else:
            what.append(f"'{issue.tool}' (step '{issue.step}')")
    allowed = result.allowed.names
    shown = ", ".join(allowed[:20]) + (", …" if len(allowed) > 20 else "")
    when = f"after {_retries(retries)}" + ("" if config.enabled else " (retry disabled)")
    message = (f"LLM planner hallucinated {', '.join(what)} {when}: not in the "
               f"{len(allowed)} allowed tools [{shown}].")
    near = {i.tool: i.suggested_tools for i in result.hallucinations if i.suggested_tools}
    if near:
        message += " Closest allowed: " + "; ".join(
            f"{tool} -> {', '.join(s)}" for tool, s in near.items()) + "."
    return (message + " Verify the tool is registered and included in the list given to "
            "the planner.")


def generate_validated_plan(
    request: str,
    generate: PlanGenerator,
    allowed: Any,
    *,
    reselect: Reselector | None = None,
    config: PlanRetryConfig | None = None,
    request_id: str | None = None,
    telemetry: GuardTelemetry | None = None,
) -> ValidatedPlan:
    """Generate a plan and regenerate it, a bounded number of times, until it is valid.

    Args:
        request: The user request the plan is for.
        generate: ``generate(attempt) -> plan``; build the prompt from
            ``attempt.request`` and ``attempt.allowed``, put ``attempt.feedback`` first
            (``attempt.compose(prompt)``) and use ``attempt.temperature`` when not None.
            Return any accepted plan form, or a :class:`GeneratedPlan`.
        allowed: The exact tools/agents the planner is shown, any accepted form.
        reselect: Optional ``reselect(enhanced_request) -> allowed``: select tools again
            for the request with its capability hint (used with ``enhanced_retry``).
        config: Retry settings; defaults to :class:`PlanRetryConfig()`.
        request_id: Telemetry request id; the current trace id or a random id if None.
        telemetry: Where to emit; the planning module's ``GuardTelemetry`` if None.

    Returns:
        The first valid plan, with ``retries_used`` and the allowed list it passed.

    Raises:
        GuardInputError: ``allowed`` or the first plan cannot be interpreted.
        PlanHallucinationError: The last plan still invents tools, agents or capabilities.
        PlanDependencyError: The last plan's dependencies cannot execute.
        PlanRegenerationError: ``generate`` failed (or returned garbage) during a retry.
        Exception: Whatever the first ``generate`` call raises, unchanged.
    """
    config = config or PlanRetryConfig()
    request_id = request_id or new_request_id()
    report = _Reporter(telemetry or _TELEMETRY, request_id, config.retry_budget)

    catalog = AllowedTools.parse(allowed)
    attempt = PlanAttempt(request=request, allowed=allowed, original_request=request,
                          catalog=catalog)
    plan, prompt = _unwrap(generate(attempt))
    # Validated quietly: the loop reports each detection itself, with its retry count.
    result = validate_plan(plan, catalog, emit=False)
    hallucinated = False

    while not result.valid:
        if result.hallucinations:
            hallucinated = True
            report.detected(result, attempt, plan, prompt)
        else:
            report.invalid(result, attempt)
        if attempt.retry >= config.retry_budget:
            break
        attempt = _next_attempt(attempt, result, plan, config, reselect, report)
        report.retrying(attempt, result.allowed)
        try:
            plan, prompt = _unwrap(generate(attempt))
            new_result = validate_plan(plan, attempt.catalog, emit=False)
        except Exception as exc:
            report.regeneration_failed(exc, attempt.retry, result.hallucinated_names)
            cause = (f"the planner hallucinated {', '.join(result.hallucinated_names)}"
                     if result.hallucinations else "the plan was invalid")
            raise PlanRegenerationError(
                f"Plan regeneration failed on retry {attempt.retry} of "
                f"{config.retry_budget} (after {cause}): {type(exc).__name__}: {exc}",
                result=result, retries_used=attempt.retry, plan=attempt.previous_plan,
                request_id=request_id) from exc
        report.regeneration_complete(attempt.retry)
        result = new_result

    if result.valid:
        if hallucinated:
            report.recovered(attempt.retry)
        return ValidatedPlan(plan=plan, steps=result.steps, allowed=attempt.allowed,
                             retries_used=attempt.retry, request_id=request_id,
                             validation=result)

    if result.hallucinations:
        message = _hallucination_message(result, attempt.retry, config)
        report.unrecoverable(result, attempt.retry, message)
        raise PlanHallucinationError(message, result=result, retries_used=attempt.retry,
                                     plan=plan, request_id=request_id)
    message = (f"LLM planner produced a plan whose dependencies cannot execute after "
               f"{_retries(attempt.retry)}: "
               f"{' '.join(e.message for e in result.errors)} Check that the planner "
               f"prompt asks for unique step ids and depends_on lists of earlier steps.")
    report.dependency_failure(attempt.retry, message)
    raise PlanDependencyError(message, result=result, retries_used=attempt.retry,
                              plan=plan, request_id=request_id)


def _next_attempt(attempt: PlanAttempt, result: PlanValidationResult, plan: Any,
                  config: PlanRetryConfig, reselect: Reselector | None,
                  report: _Reporter) -> PlanAttempt:
    retry = attempt.retry + 1
    request = attempt.original_request
    allowed, catalog = attempt.allowed, result.allowed
    if config.enhanced_retry and result.hallucinations:
        request = build_enhanced_request(attempt.original_request, result)
        if reselect is not None:
            try:
                new_allowed = reselect(request)
                # Parsed here so a malformed reselection falls back like a failed one.
                catalog = AllowedTools.parse(new_allowed)
                allowed = new_allowed
            except Exception as exc:  # noqa: BLE001 - the old list is a safe fallback
                report.reselect_failed(exc, retry)
    return replace(
        attempt,
        request=request,
        allowed=allowed,
        catalog=catalog,
        temperature=config.retry_temperature,
        retry=retry,
        feedback=build_retry_feedback(result, catalog),
        previous_plan=plan,
        previous_result=result,
    )
