"""Validate an LLM-generated plan against the exact tool list the planner was shown.

Family 1 of the guards (seeds 002 and 003). A plan step that names a tool, agent or
capability the planner was not given is a hallucination; dependency mistakes (missing,
forward, self, cycles) make a plan unexecutable too. Validation is deterministic code,
not an LLM judgement, so a prompt cannot talk its way past it.

Accepted plan forms (or a JSON string of either)::

    [{"id": "step_1", "tool": "organize_files", "inputs": {...}, "depends_on": []}]
    {"plan_id": "p1", "steps": [{"step_id": "step_1", "agent_name": "weather-tool-v2",
      "instruction": "...", "depends_on": [],
      "metadata": {"capability": "get_current_weather", "parameters": {...}}}]}

Accepted ``allowed`` forms (tool names, agent -> capabilities mappings, OpenAI or
Anthropic tool definitions, the planner's capability text, or a parsed
:class:`AllowedTools`) are described in :mod:`guardtrace.collectors.allowed_tools`;
name suggestions for invented tools come from :mod:`guardtrace.collectors.tool_suggestions`.
Both are re-exported here (:class:`AllowedTools`, :func:`suggest_tools`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from guardtrace.collectors.allowed_tools import AllowedTools, suggest_tools
from guardtrace.collectors.errors import GuardInputError, is_mapping, loads_json, require_object
from guardtrace.collectors.tool_suggestions import MAX_SUGGESTIONS

__all__ = [
    "AllowedTools",
    "PlanErrorType",
    "PlanIssue",
    "PlanStep",
    "PlanValidationResult",
    "scan_plan_input",
    "suggest_tools",
    "validate_plan",
]


class PlanErrorType(StrEnum):
    """What is wrong with a plan step (``error_type`` of a :class:`PlanIssue`).

    Values are plain strings on the wire (span attribute ``error_type``, scanner JSON).
    ``DUPLICATE_STEP_ID`` is ours (the seeds have no name for it): two steps share an
    id, so dependencies on that id are ambiguous.
    """

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
class PlanStep:
    """One step of a plan, normalised from either plan form.

    Attributes:
        position: 1-based position in the plan (what error messages call "step N").
        step_id: The declared ``id``/``step_id`` as a string, or ``"#N"`` when the step
            declares none (such a step cannot be depended on).
        tool: The ``tool`` or ``agent_name``.
        capability: ``metadata.capability`` (or a top-level ``capability``), if any.
        instruction: The step's ``instruction``, if any.
        depends_on: Step ids this step depends on, in declared order, without repeats.
    """

    position: int
    step_id: str
    tool: str
    capability: str | None = None
    instruction: str | None = None
    depends_on: tuple[str, ...] = ()


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
    """

    error_type: PlanErrorType
    step: str | None
    tool: str | None
    message: str
    suggested_tools: tuple[str, ...] = ()
    capability: str | None = None
    cycle: tuple[str, ...] = ()

    @property
    def is_hallucination(self) -> bool:
        """True for an invented tool, agent or capability."""
        return self.error_type in _HALLUCINATION_TYPES

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: the five scanner keys, plus capability and cycle if set."""
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

    def to_dict(self) -> dict[str, Any]:
        """``{"valid": bool, "errors": [...]}`` ready for JSON."""
        return {"valid": self.valid, "errors": [e.to_dict() for e in self.errors]}


# --- the plan ----------------------------------------------------------------------------

def _parse_plan(plan: Any) -> list[PlanStep]:
    if isinstance(plan, (bytes, bytearray)):
        plan = plan.decode("utf-8", errors="replace")
    if isinstance(plan, str):
        plan = loads_json(plan, "plan: not valid JSON")
    if is_mapping(plan):
        if "steps" not in plan:
            raise GuardInputError("plan: object has no 'steps' list")
        steps = plan["steps"]
        if not isinstance(steps, (list, tuple)):
            raise GuardInputError(
                f"plan: 'steps' must be a list, got {type(steps).__name__}")
    elif isinstance(plan, (list, tuple)):
        steps = plan
    else:
        raise GuardInputError(
            f"plan: expected a list of steps or an object with 'steps', "
            f"got {type(plan).__name__}")
    return [_parse_step(raw, position) for position, raw in enumerate(steps, start=1)]


def _step_ref(value: Any, where: str, what: str) -> str:
    # LLMs write ids as 1 as often as "step_1"; bools are ints in Python but never ids.
    if isinstance(value, str) and value.strip():
        return value.strip()
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise GuardInputError(f"{where}: {what} must be a string or an integer, got {value!r}")


def _parse_step(raw: Any, position: int) -> PlanStep:
    where = f"plan step {position}"
    if not is_mapping(raw):
        raise GuardInputError(f"{where}: expected an object, got {type(raw).__name__}")
    tool = raw.get("tool")
    key = "tool"
    if tool is None:
        tool, key = raw.get("agent_name"), "agent_name"
    if tool is None:
        raise GuardInputError(f"{where}: missing 'tool' (or 'agent_name')")
    if not isinstance(tool, str) or not tool.strip():
        raise GuardInputError(f"{where}: '{key}' must be a non-empty string, got {tool!r}")
    raw_id = raw.get("id", raw.get("step_id"))
    step_id = f"#{position}" if raw_id is None else _step_ref(raw_id, where, "'id'")
    deps_raw = raw.get("depends_on")
    if deps_raw is None:
        deps: tuple[str, ...] = ()
    elif isinstance(deps_raw, (str, int)) and not isinstance(deps_raw, bool):
        deps = (_step_ref(deps_raw, where, "'depends_on'"),)
    elif isinstance(deps_raw, (list, tuple)):
        deps = tuple(dict.fromkeys(
            _step_ref(d, where, f"'depends_on' item {i + 1}") for i, d in enumerate(deps_raw)))
    else:
        raise GuardInputError(
            f"{where}: 'depends_on' must be a list of step ids, got {type(deps_raw).__name__}")
    metadata = raw.get("metadata")
    capability = metadata.get("capability") if is_mapping(metadata) else None
    if capability is None:
        capability = raw.get("capability")
    if capability is not None and not isinstance(capability, str):
        raise GuardInputError(f"{where}: 'capability' must be a string, got {capability!r}")
    instruction = raw.get("instruction")
    return PlanStep(
        position=position,
        step_id=step_id,
        tool=tool.strip(),
        capability=capability.strip() or None if capability else None,
        instruction=instruction if isinstance(instruction, str) and instruction else None,
        depends_on=deps,
    )


def _find_cycles(order: Sequence[str],
                 edges: Mapping[str, Sequence[str]]) -> list[tuple[str, ...]]:
    """Cycles among ``depends_on`` edges, one per DFS back edge, each starting at the
    step that appears first in the plan and ending where it started."""
    rank = {node: i for i, node in enumerate(order)}
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    cycles: list[tuple[str, ...]] = []
    seen: set[tuple[str, ...]] = set()
    for root in order:
        if root in state:
            continue
        stack: list[tuple[str, int]] = [(root, 0)]
        path: list[str] = [root]
        state[root] = 1
        while stack:  # iterative: a 1000-step chain must not hit the recursion limit
            node, i = stack[-1]
            targets = edges.get(node, ())
            if i < len(targets):
                stack[-1] = (node, i + 1)
                target = targets[i]
                mark = state.get(target)
                if mark is None:
                    state[target] = 1
                    stack.append((target, 0))
                    path.append(target)
                elif mark == 1:
                    loop = path[path.index(target):]
                    start = min(range(len(loop)), key=lambda k: rank[loop[k]])
                    loop = loop[start:] + loop[:start]
                    key = tuple(loop)
                    if key not in seen:
                        seen.add(key)
                        cycles.append((*loop, loop[0]))
            else:
                state[node] = 2
                stack.pop()
                path.pop()
    return cycles


def _listing(items: Sequence[str], limit: int = 10) -> str:
    shown = ", ".join(items[:limit])
    return f"{shown}, … ({len(items) - limit} more)" if len(items) > limit else shown


def validate_plan(plan: Any, allowed: Any) -> PlanValidationResult:
    """Check every step of ``plan`` against ``allowed`` and its dependency structure.

    A zero-step plan is valid: it is the sanctioned answer when no allowed tool fits.

    Args:
        plan: A list of steps, an orchestrator plan object, or a JSON string of either.
        allowed: The exact tools/agents the planner was shown, in any accepted form
            (see :mod:`guardtrace.collectors.allowed_tools`), or an :class:`AllowedTools`.

    Returns:
        The result; ``result.valid`` is False when there is any finding.

    Raises:
        GuardInputError: ``plan`` or ``allowed`` cannot be interpreted; the message says
            what and where, e.g. ``"plan step 2: missing 'tool' (or 'agent_name')"``.
    """
    catalog = AllowedTools.parse(allowed)
    steps = _parse_plan(plan)
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
    cycles = _find_cycles(list(first), edges)
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
        entry, implied = catalog._resolve(tool)
        if entry is None:
            suggestions = catalog.suggest(tool)
            message = (f"Step '{sid}' uses '{tool}', which is not in the allowed list "
                       f"({catalog.agent_count} allowed: {_listing(catalog.names)}).")
            if suggestions:
                message += f" Closest allowed: {', '.join(suggestions)}."
            errors.append(PlanIssue(PlanErrorType.HALLUCINATED_TOOL, sid, tool, message,
                                    suggestions, capability=step.capability))
        else:
            capability = step.capability or implied
            if (capability and entry.capabilities is not None
                    and capability not in entry.capabilities):
                suggestions = catalog._capability_features(entry).rank(
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

_SCAN_KEYS = ("id", "allowed_tools", "plan")
_SCAN_ERROR_KEYS = ("error_type", "step", "tool", "suggested_tools", "message")


def scan_plan_input(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Validate one scanner record ``{"id", "allowed_tools", "plan"}``.

    Args:
        obj: ``allowed_tools`` in any accepted allowed form, ``plan`` in either plan form.

    Returns:
        ``{"id", "valid", "errors": [{"error_type", "step", "tool", "suggested_tools",
        "message"}]}``, JSON-ready.

    Raises:
        GuardInputError: The record is malformed; the message names the record and what
            is wrong with it.
    """
    require_object(obj, "scan record: expected an object with 'id', 'allowed_tools' and 'plan'")
    record_id = obj.get("id")
    label = f"scan record {record_id!r}" if "id" in obj else "scan record"
    missing = [key for key in _SCAN_KEYS if key not in obj]
    if missing:
        raise GuardInputError(
            f"{label}: missing {', '.join(repr(k) for k in missing)}")
    if isinstance(record_id, bool) or not isinstance(record_id, (str, int)):
        raise GuardInputError(f"{label}: 'id' must be a string or an integer")
    if obj["allowed_tools"] is None:
        raise GuardInputError(f"{label}: 'allowed_tools' is null")
    try:
        catalog = AllowedTools.parse(obj["allowed_tools"], where="allowed_tools")
        result = validate_plan(obj["plan"], catalog)
    except GuardInputError as exc:
        raise GuardInputError(f"{label}: {exc}") from exc
    return {
        "id": record_id,
        "valid": result.valid,
        "errors": [{key: found[key] for key in _SCAN_ERROR_KEYS}
                   for found in (issue.to_dict() for issue in result.errors)],
    }
