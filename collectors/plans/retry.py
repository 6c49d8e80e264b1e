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
* every plan validated is one ``guardtrace.plan_tools`` evaluation result: a fail for
  each plan that invents a tool, a pass for one that does not (a loop that recovers
  shows its fails, then its pass), an ``error.type`` for one that cannot be read;
* each retry emits ``..._regeneration_complete`` or ``..._regeneration_failed``;
* a valid plan after any hallucination emits ``llm.hallucination_recovered`` and counts
  ``plan_generation.hallucination_recovered{retries_used}``; a last plan that still
  hallucinates emits ``llm.hallucination_unrecoverable`` and counts
  ``plan_generation.hallucination_unrecoverable{agent}`` once, for its first name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ...schemas.request_ids import storable_request_id
from ..emit.telemetry import GuardTelemetry, new_request_id
from .retry_prompts import PlanAttempt, build_enhanced_request, build_retry_feedback
from .retry_telemetry import RetryReporter
from .validation import (
    OPERATION,  # noqa: F401 - re-exported: it used to be defined here
    PLANNING_TELEMETRY,
    STATUS_DETECTED,  # noqa: F401 - re-exported: it used to be defined here
    AllowedTools,
    PlanErrorType,
    PlanStep,
    PlanValidationResult,
    validate_plan,
)

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
    request_id = storable_request_id(request_id or new_request_id())
    report = RetryReporter(telemetry or _TELEMETRY, request_id, config.retry_budget)

    catalog = AllowedTools.parse(allowed)
    attempt = PlanAttempt(request=request, allowed=allowed, original_request=request,
                          catalog=catalog)
    plan, prompt = _unwrap(generate(attempt))
    result = _validated(plan, catalog, report)
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
            new_result = _validated(plan, attempt.catalog, report)
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


def _validated(plan: Any, catalog: Any, report: RetryReporter) -> PlanValidationResult:
    """Validate quietly: the loop reports each detection (with its fail evaluation)
    itself, with its retry count. A plan that invents nothing is reported as a pass here;
    one that cannot be read as an evaluation that could not decide, then raised."""
    try:
        result = validate_plan(plan, catalog, emit=False)
    except Exception as exc:
        report.unevaluated(exc)
        raise
    if not result.hallucinations:
        report.passed()
    return result


def _next_attempt(attempt: PlanAttempt, result: PlanValidationResult, plan: Any,
                  config: PlanRetryConfig, reselect: Reselector | None,
                  report: RetryReporter) -> PlanAttempt:
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
