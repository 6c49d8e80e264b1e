"""The plan retry's telemetry: one :class:`RetryReporter` per run of
:func:`~guardtrace.collectors.plans.retry.generate_validated_plan`.

Every method is guarded, so telemetry cannot change the loop's outcome, even with a
custom ``GuardTelemetry`` that raises. Detections go through
:func:`~guardtrace.collectors.plans.validation.report_hallucinations`, the emitter
``validate_plan`` uses on its own, so the two emit alike; so do the verdicts, one
``guardtrace.plan_tools`` evaluation result per plan validated (a fail with each
detection, :meth:`RetryReporter.passed` for a plan that invents nothing), so a loop that
recovers shows a fail for each rejected plan and a pass for the last.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from ...schemas import names
from ..emit.telemetry import GuardTelemetry, guarded
from .allowed_tools import AllowedTools
from .findings import PlanValidationResult, shown_name
from .validation import report_hallucinations, report_pass, report_unevaluated

if TYPE_CHECKING:
    from .retry_prompts import PlanAttempt

__all__ = ["RetryReporter"]

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


def _skip(*_args: Any, **_kwargs: Any) -> None:
    return None


def _fields(fields: dict[str, Any]) -> dict[str, Any]:
    """Log fields keyed by attribute names, typed so they never pass for ``log``'s own
    keyword arguments."""
    return fields


class RetryReporter:
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
    def passed(self, response_id: str | None = None) -> None:
        """The verdict on a plan that invents nothing: a ``guardtrace.plan_tools`` pass
        (a plan that does gets its fail with its detection, :meth:`detected`)."""
        report_pass(request_id=self.request_id, telemetry=self.t, response_id=response_id)

    @guarded(_skip)
    def unevaluated(self, error: BaseException, response_id: str | None = None) -> None:
        """A plan the loop could not validate: an evaluation with ``error.type``."""
        report_unevaluated(error, request_id=self.request_id, telemetry=self.t,
                           response_id=response_id)

    @guarded(_skip)
    def detected(self, result: PlanValidationResult, attempt: PlanAttempt, plan: Any,
                 prompt: str | None, response_id: str | None = None) -> None:
        """A plan that invents tools: the detection with its fail evaluation, and the
        payload."""
        catalog = result.allowed
        report_hallucinations(result, request_id=self.request_id, telemetry=self.t,
                              retry=attempt.retry, max_retries=self.budget,
                              duration_ms=self.ms(), response_id=response_id)
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
                   **_fields({names.ATTR_HALL_RETRY: attempt.retry}))

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
                   duration_ms=self.ms(), **_fields({names.ATTR_RETRIES_USED: retries_used}))

    @guarded(_skip)
    def unrecoverable(self, result: PlanValidationResult, retries: int, error: str) -> None:
        issue = result.hallucinations[0]
        shown = None if issue.tool is None else shown_name(issue.tool)
        self.t.event(names.EVENT_HALLUCINATION_UNRECOVERABLE, self.request_id, {
            names.ATTR_HALLUCINATED_AGENT: shown,
            names.ATTR_AGENT: shown,
            names.ATTR_RETRIES_EXHAUSTED: retries,
            names.ATTR_ERROR_TYPE: str(issue.error_type),
        })
        self.t.count(names.METRIC_HALLUCINATION_UNRECOVERABLE, agent=shown)
        self.t.log(logging.ERROR, "LLM planner hallucination unrecoverable after retries",
                   request_id=self.request_id, status=STATUS_UNRECOVERABLE, error=error,
                   duration_ms=self.ms(),
                   **{names.ATTR_HALLUCINATED_AGENT: shown,
                      names.ATTR_HALLUCINATED_AGENTS: [
                          shown_name(n) for n in result.hallucinated_names],
                      names.ATTR_RETRIES_EXHAUSTED: retries})

    @guarded(_skip)
    def dependency_failure(self, retries: int, error: str) -> None:
        self.t.log(logging.ERROR, "LLM planner produced no executable plan",
                   request_id=self.request_id, status=STATUS_INVALID, error=error,
                   duration_ms=self.ms(), **{names.ATTR_RETRIES_EXHAUSTED: retries})
