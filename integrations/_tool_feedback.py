"""What an adapter tells the model that called a tool it was not given.

A model's tool calls are its plan, so the adapters reuse the plan retry's feedback
(:func:`~guardtrace.collectors.plans.retry_prompts.build_retry_feedback`): it names each
invented tool with the closest allowed names, lists the allowed tools and says that
answering without a tool is fine. One line after it says what that means for calls.
"""

from __future__ import annotations

from typing import Any

from ..collectors.plans.findings import PlanValidationResult
from ..collectors.plans.retry_prompts import build_retry_feedback

__all__ = ["TOOL_CALL_NOTE", "tool_call_feedback"]

# The feedback speaks of plans and steps; the model made tool calls.
TOOL_CALL_NOTE = ("(The plan is your tool calls: a call of a tool that is not in the allowed "
                  "list did not run. Call only allowed tools, or answer without calling one.)")


def tool_call_feedback(result: PlanValidationResult, allowed: Any) -> str:
    """The retry feedback for rejected tool calls, for the model to read next."""
    return f"{build_retry_feedback(result, allowed)}\n\n{TOOL_CALL_NOTE}"
