"""Acting on a hallucinated tool: ask the model again, with the plan retry's feedback.

The plan retry loop's decision (:func:`~guardtrace.collectors.plans.retry.generate_validated_plan`)
for one model call: the reply's tool calls are validated against the tools sent; while
they name a tool that was not sent, the call is made again with the loop's feedback
(:func:`~guardtrace.collectors.plans.retry_prompts.build_retry_feedback`) first in the
prompt, at most ``budget`` times. The lifecycle is emitted by the loop's own
:class:`~guardtrace.collectors.plans.retry_telemetry.RetryReporter`: detected (with
``hall_retry``), regeneration complete or failed, recovered or unrecoverable, and one
``guardtrace.plan_tools`` evaluation result per response validated (a fail for each
response that calls a tool not sent, a pass for one that does not).

The loop is written once, without I/O: :func:`tool_retry` is a generator that yields the
feedback of each retry and is sent the new response (or thrown the call's exception),
driven by :func:`retry_sync` or :func:`retry_async`, so sync and async clients act alike.

The caller always gets a response, never an exception of the loop: the recovered one,
or, when the budget runs out or a retry fails, the last response obtained (what it
would have had without acting).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from dataclasses import replace
from typing import Any

from ..collectors.plans.allowed_tools import AllowedTools
from ..collectors.plans.findings import PlanValidationResult, shown_name
from ..collectors.plans.retry_prompts import PlanAttempt, build_retry_feedback
from ..collectors.plans.retry_telemetry import RetryReporter
from ..collectors.plans.validation import PLANNING_TELEMETRY, validate_plan
from ._exchange import response_id
from ._sdk import plain

__all__ = ["ToolRetry", "retry_async", "retry_sync", "tool_retry"]

ToolRetry = Generator[str, Any, Any]
"""Yields each retry's feedback, is sent its response, returns the response to give."""


def _unrecoverable(result: PlanValidationResult, retries: int) -> str:
    invented = ", ".join(f"'{shown_name(name)}'" for name in result.hallucinated_names)
    sent = ", ".join(shown_name(name) for name in result.allowed.names[:20])
    return (f"The model still called {invented} after {retries} "
            f"{'retry' if retries == 1 else 'retries'}: not among the "
            f"{len(result.allowed.names)} tools sent [{sent}].")


def tool_retry(response: Any, tools: Any, *, budget: int, request_id: str,
               request_text: str = "") -> ToolRetry:
    """The retry loop of one model call, as a generator (see the module docstring).

    Args:
        response: The first response.
        tools: The tools sent, any shape the hooks read.
        budget: Retries allowed (0: detect and report only).
        request_id: The request id of the whole loop's telemetry.
        request_text: The user's request, shown after the feedback in the payload.

    Raises:
        GuardInputError: ``tools`` or the first response cannot be read.
    """
    report = RetryReporter(PLANNING_TELEMETRY, request_id, budget)
    catalog = AllowedTools.parse(tools)
    attempt = PlanAttempt(request=request_text, allowed=tools, original_request=request_text,
                          catalog=catalog)
    result = _validated(response, catalog, report)
    hallucinated = False
    while result.hallucinations:
        hallucinated = True
        report.detected(result, attempt, plain(response), None, response_id(response))
        if attempt.retry >= budget:
            report.unrecoverable(result, attempt.retry, _unrecoverable(result, attempt.retry))
            return response
        attempt = replace(attempt, retry=attempt.retry + 1,
                          feedback=build_retry_feedback(result, catalog),
                          previous_plan=plain(response), previous_result=result)
        report.retrying(attempt, catalog)
        try:
            retried = yield attempt.feedback
            retried_result = _validated(retried, catalog, report)
        except Exception as exc:  # noqa: BLE001 - the previous response is still good to give
            report.regeneration_failed(exc, attempt.retry, result.hallucinated_names)
            return response
        report.regeneration_complete(attempt.retry)
        response, result = retried, retried_result
    if hallucinated:
        report.recovered(attempt.retry)
    return response


def _validated(response: Any, catalog: AllowedTools, report: RetryReporter) -> PlanValidationResult:
    """Validate quietly: the loop reports each detection (with its fail evaluation)
    itself, with its retry count. A response that calls only tools sent is reported as a
    pass here; one that cannot be read as an evaluation that could not decide, then
    raised."""
    try:
        result = validate_plan(response, catalog, emit=False)
    except Exception as exc:
        report.unevaluated(exc, response_id(response))
        raise
    if not result.hallucinations:
        report.passed(response_id(response))
    return result


def retry_sync(loop: ToolRetry, call: Callable[[str], Any]) -> Any:
    """Drive ``loop``, making each retry with ``call(feedback)``; its final response."""
    try:
        feedback = next(loop)
        while True:
            try:
                response = call(feedback)
            except Exception as exc:  # noqa: BLE001 - handed to the loop, which reports it
                feedback = loop.throw(exc)
            else:
                feedback = loop.send(response)
    except StopIteration as done:
        return done.value


async def retry_async(loop: ToolRetry, call: Callable[[str], Awaitable[Any]]) -> Any:
    """:func:`retry_sync` for an async client: ``await call(feedback)`` for each retry."""
    try:
        feedback = next(loop)
        while True:
            try:
                response = await call(feedback)
            except Exception as exc:  # noqa: BLE001 - handed to the loop, which reports it
                feedback = loop.throw(exc)
            else:
                feedback = loop.send(response)
    except StopIteration as done:
        return done.value
