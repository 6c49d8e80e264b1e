"""What plan validation finds: the error types, one finding, and the whole result.

Plain data, shared by :func:`~guardtrace.collectors.plans.validation.validate_plan`, the
retry loop (:mod:`guardtrace.collectors.plans.retry`) and the offline scanner; the
``error_type`` values are strings on the wire (span attribute, scanner JSON).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .allowed_tools import AllowedTools
from .plan_shapes import PlanStep

__all__ = ["PlanErrorType", "PlanIssue", "PlanValidationResult", "shown_name"]

# Names in messages and telemetry are cut here: a message must stay readable whatever a
# model wrote, and a name of a megabyte is no tool's name (redacting and shipping all of
# it would hold the agent's thread).
_MAX_SHOWN_NAME = 120


def shown_name(name: str) -> str:
    """``name`` as messages and telemetry show it: cut to a readable length."""
    return name if len(name) <= _MAX_SHOWN_NAME else name[:_MAX_SHOWN_NAME] + "…"


class PlanErrorType(StrEnum):
    """What is wrong with a plan step (``error_type`` of a :class:`PlanIssue`).

    Values are plain strings on the wire (span attribute ``error_type``, scanner JSON).
    ``DUPLICATE_STEP_ID`` is ours (the seeds have no name for it): two steps share an
    id, so dependencies on that id are ambiguous. ``ABSTENTION`` is ours too: the step
    names no tool but says none applies (``no_function``); the plan cannot run as
    written, yet nothing was invented.
    """

    ABSTENTION = "abstention"
    HALLUCINATED_TOOL = "hallucinated_tool"
    HALLUCINATED_CAPABILITY = "hallucinated_capability"
    MISSING_DEPENDENCY = "missing_dependency"
    FORWARD_DEPENDENCY = "forward_dependency"
    SELF_DEPENDENCY = "self_dependency"
    DEPENDENCY_CYCLE = "dependency_cycle"
    DUPLICATE_STEP_ID = "duplicate_step_id"


_HALLUCINATION_TYPES = frozenset({PlanErrorType.HALLUCINATED_TOOL,
                                  PlanErrorType.HALLUCINATED_CAPABILITY})


@dataclass(frozen=True)
class PlanIssue:
    """One validation finding.

    Attributes:
        error_type: What kind of problem (see :class:`PlanErrorType`).
        step: Id of the step it concerns (the first step of the path for cycles).
        tool: That step's tool or agent name.
        message: A sentence a person or the planner LLM can act on.
        suggested_tools: For hallucinated names, the closest allowed names, best first
            (capabilities of the agent for ``hallucinated_capability``); may be empty.
        capability: The capability the step asked for, when the issue concerns it.
        cycle: For ``dependency_cycle``, the path following ``depends_on`` edges and
            ending where it started, e.g. ``("step_1", "step_2", "step_3", "step_1")``.
        placeholder: For ``hallucinated_tool``, the name stands for "some tool" or the
            chat runtime (``func1``, ``tools.call``, ``python``) rather than naming one;
            such names get no suggestion.
    """

    error_type: PlanErrorType
    step: str | None
    tool: str | None
    message: str
    suggested_tools: tuple[str, ...] = ()
    capability: str | None = None
    cycle: tuple[str, ...] = ()
    placeholder: bool = False

    @property
    def is_hallucination(self) -> bool:
        """True for an invented tool, agent or capability."""
        return self.error_type in _HALLUCINATION_TYPES

    @property
    def is_abstention(self) -> bool:
        """True when the step's name says no tool applies (``no_function``)."""
        return self.error_type is PlanErrorType.ABSTENTION

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: the five scanner keys, plus capability, cycle and
        placeholder when set."""
        out: dict[str, Any] = {
            "error_type": str(self.error_type),
            "step": self.step,
            "tool": self.tool,
            "suggested_tools": list(self.suggested_tools),
            "message": self.message,
        }
        if self.capability is not None:
            out["capability"] = self.capability
        if self.cycle:
            out["cycle"] = list(self.cycle)
        if self.placeholder:
            out["placeholder"] = True
        return out


@dataclass(frozen=True)
class PlanValidationResult:
    """The outcome of :func:`validate_plan`.

    Attributes:
        errors: Every finding, in plan order (cycles last). Empty means valid.
        steps: The parsed steps (empty for the sanctioned zero-step plan).
        allowed: The parsed allowed list the plan was checked against.
    """

    errors: tuple[PlanIssue, ...]
    steps: tuple[PlanStep, ...]
    allowed: AllowedTools = field(repr=False, compare=False)

    @property
    def valid(self) -> bool:
        """True when the plan has no errors at all."""
        return not self.errors

    @property
    def hallucinations(self) -> tuple[PlanIssue, ...]:
        """The ``hallucinated_tool`` and ``hallucinated_capability`` findings."""
        return tuple(e for e in self.errors if e.is_hallucination)

    @property
    def hallucinated_names(self) -> tuple[str, ...]:
        """Distinct invented tool/agent names (the agent for capability findings)."""
        return tuple(dict.fromkeys(e.tool for e in self.hallucinations if e.tool))

    @property
    def abstentions(self) -> tuple[PlanIssue, ...]:
        """The ``abstention`` findings: steps whose name says no tool applies."""
        return tuple(e for e in self.errors if e.is_abstention)

    @property
    def abstained(self) -> bool:
        """True when every step is an abstention: the planner answered that no tool
        fits (as a zero-step plan would, but spelt as a call)."""
        return bool(self.steps) and len(self.abstentions) == len(self.steps)

    def to_dict(self) -> dict[str, Any]:
        """``{"valid": bool, "errors": [...]}`` ready for JSON."""
        return {"valid": self.valid, "errors": [e.to_dict() for e in self.errors]}
