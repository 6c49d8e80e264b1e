"""What the plan retry tells the planner: the attempt it is asked to plan (with its
feedback first), the feedback that opens the retry prompt, and the capability hint added
to the request before tools are selected again.

Both are generic on purpose: they repeat the names, capabilities and instructions of the
rejected plan and the allowed list of the retry, never a map from one domain's words to
its tools, so they work for any planner and any tool set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .allowed_tools import AllowedTools
from .findings import PlanErrorType, PlanIssue, PlanValidationResult
from .plan_shapes import PlanStep

__all__ = ["PlanAttempt", "build_enhanced_request", "build_retry_feedback"]


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
