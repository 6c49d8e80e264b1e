"""Validate an LLM-generated plan against the exact tool list the planner was shown.

Family 1 of the guards (seeds 002 and 003). A plan step that names a tool, agent or
capability the planner was not given is a hallucination; dependency mistakes (missing,
forward, self, cycles) make a plan unexecutable too. Validation is deterministic code,
not an LLM judgement, so a prompt cannot talk its way past it.

Accepted plan forms (or a JSON string of any of them)::

    [{"id": "step_1", "tool": "organize_files", "inputs": {...}, "depends_on": []}]
    {"plan_id": "p1", "steps": [{"step_id": "step_1", "agent_name": "weather-tool-v2",
      "instruction": "...", "depends_on": [],
      "metadata": {"capability": "get_current_weather", "parameters": {...}}}]}

and the tool calls a model made, as dicts or SDK objects (each call is a step; its id
is the call id; its arguments are read, a JSON string decoded):

* OpenAI Chat Completions: a completion, a choice, an assistant message, or its
  ``tool_calls`` (``{"id", "type": "function", "function": {"name", "arguments"}}``,
  custom tool calls, and the legacy ``function_call``);
* OpenAI Responses: a response, its ``output`` list, or ``function_call`` /
  ``custom_tool_call`` items;
* Anthropic Messages: a message, its ``content`` list, or ``tool_use`` blocks;
* any ``{"name", "arguments"}`` (or LangChain's ``{"name", "args", "id"}``) call;
* a list mixing any of these (a turn's messages).

Text, reasoning and tool-result items hold no call and are skipped. Calls the provider
runs itself (Responses ``web_search_call``, ``file_search_call``, ``mcp_call`` ...,
Anthropic ``server_tool_use`` / ``mcp_tool_use``) are not plan steps: the provider only
runs tools the request enabled, so there is nothing to validate.

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
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .allowed_tools import AllowedTools, suggest_tools
from ..errors import GuardInputError, is_mapping, loads_json, require_object
from ..emit.telemetry import GuardTelemetry, guarded, new_request_id
from .suggestions import (
    ABSTENTION,
    MAX_SUGGESTIONS,
    PLACEHOLDER,
    classify_unknown_name,
)
from ...schemas import names

__all__ = [
    "OPERATION",
    "PLANNING_TELEMETRY",
    "AllowedTools",
    "PlanErrorType",
    "PlanIssue",
    "PlanStep",
    "PlanValidationResult",
    "report_hallucinations",
    "scan_plan_input",
    "suggest_tools",
    "validate_plan",
]

#: The ``operation`` of plan-validation telemetry (log lines, the span of its own).
OPERATION = "hallucination_detection"
#: Where plan validation and the retry loop emit unless given another telemetry.
PLANNING_TELEMETRY = GuardTelemetry(names.MODULE_PLANNING, OPERATION)
#: Value of the log ``status`` field for a detection.
STATUS_DETECTED = "detected"


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
        arguments: What the step passes to its tool (``arguments``, ``inputs``,
            ``input``, ``args``, ``parameters`` or ``metadata.parameters``; a call's
            JSON-string arguments decoded), or None when it passes none or they cannot
            be read.
    """

    position: int
    step_id: str
    tool: str
    capability: str | None = None
    instruction: str | None = None
    depends_on: tuple[str, ...] = ()
    arguments: Any = field(default=None, compare=False)


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


# --- the plan ----------------------------------------------------------------------------

# Call items and blocks the client executes, by their "type" (LangChain's is "tool_call").
_CALL_TYPES = frozenset({"function_call", "custom_tool_call", "tool_use", "tool_call"})
# Where a step keeps what it passes to its tool, in order of preference.
_ARGUMENT_KEYS = ("arguments", "inputs", "input", "args", "parameters", "params")


def _get(obj: Any, key: str) -> Any:
    """``obj[key]`` for mappings, ``obj.key`` for SDK objects, else None."""
    if is_mapping(obj):
        return obj.get(key)
    return getattr(obj, key, None)


def _is_object(value: Any) -> bool:
    """A mapping or an SDK object, not a scalar or a list."""
    return not (value is None or isinstance(value, (str, bytes, bytearray, int, float,
                                                    complex, list, tuple)))


def _arguments(value: Any) -> Any:
    """A step's arguments as a mapping when they are one (a JSON string decoded)."""
    if value is None or type(value) is dict:  # the common cases, kept cheap
        return value
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None  # free text or truncated JSON: the name is still checked
    if is_mapping(value):
        return value
    # pydantic objects (SDK inputs) expose their fields as a dict.
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            value = dump()
        except Exception:  # noqa: BLE001 - unreadable arguments are no arguments
            return None
        return value if is_mapping(value) else None
    return None


def _call_of(item: Any) -> tuple[Any, Any, Any] | None:
    """``(name, arguments, call id)`` when ``item`` is one tool call the client runs."""
    kind = _get(item, "type")
    if not isinstance(kind, str):
        kind = None
    if kind in _CALL_TYPES:
        arguments = _get(item, "arguments")
        if arguments is None:
            arguments = _get(item, "args" if kind == "tool_call" else "input")
        # Responses items have an item id and a call id; results refer to the call id.
        return _get(item, "name"), arguments, _get(item, "call_id") or _get(item, "id")
    # Chat Completions: {"id", "type": "function", "function": {"name", "arguments"}};
    # custom tools: {"type": "custom", "custom": {"name", "input"}}.
    for key in ("function", "custom"):
        inner = _get(item, key)
        if inner is not None and (is_mapping(inner) or (kind == key and _is_object(inner))):
            arguments = _get(inner, "arguments")
            if arguments is None:
                arguments = _get(inner, "input")
            return _get(inner, "name"), arguments, _get(item, "id")
    # A bare call: {"name", "arguments"}. A typed item that is not a client call type
    # (Responses "mcp_call") is the provider's, however it is spelt.
    if (is_mapping(item) and kind is None and "name" in item and "tool" not in item
            and "agent_name" not in item and ("arguments" in item or "args" in item)):
        arguments = item.get("arguments", item.get("args"))
        return item["name"], arguments, item.get("id") or item.get("call_id")
    return None


def _calls_in_container(obj: Any) -> list[Any] | None:
    """The items that may be calls inside a completion, choice, message or response, in
    order; None when ``obj`` is none of those."""
    choices = _get(obj, "choices")
    if isinstance(choices, (list, tuple)):
        out: list[Any] = []
        for choice in choices:
            # `delta` for a streamed chunk: the name arrives in the first delta.
            message = _get(choice, "message") or _get(choice, "delta")
            out.extend(_calls_in_container(message) or ())
        return out
    message = _get(obj, "message")
    if _is_object(message) and _get(obj, "role") is None:
        return _calls_in_container(message)  # one choice
    output = _get(obj, "output")
    if isinstance(output, (list, tuple)):  # a Responses-API response
        return list(output)
    tool_calls = _get(obj, "tool_calls")
    legacy = _get(obj, "function_call")
    if isinstance(tool_calls, (list, tuple)) or _is_object(legacy):
        out = list(tool_calls) if isinstance(tool_calls, (list, tuple)) else []
        if _is_object(legacy):  # the legacy single call of a chat message
            out.append({"name": _get(legacy, "name"), "arguments": _get(legacy, "arguments")})
        return out
    if _get(obj, "role") is not None or _get(obj, "type") == "message":
        # A message without chat tool calls: its content blocks, if it has any.
        content = _get(obj, "content")
        return list(content) if isinstance(content, (list, tuple)) else []
    return None


def _plan_items(plan: Any) -> list[Any]:
    """The raw steps and calls of a plan in any accepted form, in order."""
    if isinstance(plan, (bytes, bytearray)):
        plan = plan.decode("utf-8", errors="replace")
    if isinstance(plan, str):
        plan = loads_json(plan, "plan: not valid JSON")
    if is_mapping(plan) and "steps" in plan:
        steps = plan["steps"]
        if not isinstance(steps, (list, tuple)):
            raise GuardInputError(
                f"plan: 'steps' must be a list, got {type(steps).__name__}")
        return list(steps)
    if isinstance(plan, (list, tuple)):
        return list(plan)
    if _is_object(plan):
        if _call_of(plan) is not None:
            return [plan]
        calls = _calls_in_container(plan)
        if calls is not None:
            return calls
        if is_mapping(plan):
            raise GuardInputError("plan: object has no 'steps' list, and is no tool call, "
                                  "message or model response")
    raise GuardInputError(
        f"plan: expected a list of steps or tool calls, an object with 'steps', or a "
        f"model response or message; got {type(plan).__name__}")


def _parse_plan(plan: Any) -> list[PlanStep]:
    steps: list[PlanStep] = []
    for raw in _plan_items(plan):
        _add_steps(raw, steps)
    return steps


def _add_steps(raw: Any, steps: list[PlanStep]) -> None:
    """Append the step ``raw`` is, or the calls it holds (a message in a turn's list)."""
    position = len(steps) + 1
    if is_mapping(raw) and ("tool" in raw or "agent_name" in raw):
        steps.append(_parse_step(raw, position))
        return
    if _is_object(raw):
        call = _call_of(raw)
        if call is not None:
            steps.append(_call_step(call, position))
            return
        inner = _calls_in_container(raw)
        if inner is not None:
            for item in inner:
                _add_steps(item, steps)
            return
        if isinstance(_get(raw, "type"), str):
            return  # text, reasoning, tool results, calls the provider ran itself
    steps.append(_parse_step(raw, position))  # raises, saying what the step lacks


def _call_step(call: tuple[Any, Any, Any], position: int) -> PlanStep:
    name, arguments, call_id = call
    if not isinstance(name, str) or not name.strip():
        raise GuardInputError(f"plan step {position}: a tool call without a name, "
                              f"got {name!r}")
    step_id = f"#{position}"
    if isinstance(call_id, (str, int)) and not isinstance(call_id, bool) \
            and str(call_id).strip():
        step_id = str(call_id).strip()
    return PlanStep(position=position, step_id=step_id, tool=name.strip(),
                    arguments=_arguments(arguments))


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
    arguments = None
    for key in _ARGUMENT_KEYS:
        arguments = raw.get(key)
        if arguments is not None:
            break
    if arguments is None and is_mapping(metadata):
        arguments = metadata.get("parameters")
    return PlanStep(
        position=position,
        step_id=step_id,
        tool=tool.strip(),
        capability=capability.strip() or None if capability else None,
        instruction=instruction if isinstance(instruction, str) and instruction else None,
        depends_on=deps,
        arguments=_arguments(arguments),
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


# Names in messages are cut here: a message must stay readable whatever a model wrote.
_MAX_SHOWN_NAME = 120


def _shown(name: str) -> str:
    return name if len(name) <= _MAX_SHOWN_NAME else name[:_MAX_SHOWN_NAME] + "…"


def _listing(items: Sequence[str], limit: int = 10) -> str:
    shown = ", ".join(_shown(item) for item in items[:limit])
    return f"{shown}, … ({len(items) - limit} more)" if len(items) > limit else shown


def _unknown_tool_issue(step: PlanStep, catalog: AllowedTools) -> PlanIssue:
    """The finding for a step whose tool is not in the list: an abstention, a
    placeholder, or an invented tool with the closest allowed names."""
    sid, tool = _shown(step.step_id), step.tool
    allowed = f"{catalog.agent_count} allowed: {_listing(catalog.names)}"
    kind = classify_unknown_name(tool)
    if kind == ABSTENTION:
        return PlanIssue(
            PlanErrorType.ABSTENTION, sid, tool,
            f"Step '{sid}' answers '{_shown(tool)}', which says no tool applies rather than "
            f"naming one ({allowed}). If no allowed tool fits the request, the plan should "
            f"have zero steps.", capability=step.capability)
    if kind == PLACEHOLDER:
        return PlanIssue(
            PlanErrorType.HALLUCINATED_TOOL, sid, tool,
            f"Step '{sid}' uses '{_shown(tool)}', a placeholder rather than the name of a tool; it "
            f"is not in the allowed list ({allowed}).",
            capability=step.capability, placeholder=True)
    suggestions = catalog.suggest(tool, arguments=step.arguments)
    message = (f"Step '{sid}' uses '{_shown(tool)}', which is not in the allowed list "
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
                          duration_ms: float | None = None) -> None:
    """Emit one plan's hallucination detection: a span event and a count per distinct
    invented name, and one WARN log line. Never raises; emits nothing for a result
    without hallucinations.

    :func:`validate_plan` calls it for every detection; the retry loop, which validates
    with ``emit=False``, calls it with the retry count instead.

    Args:
        result: A validation result.
        request_id: The request the plan belongs to (first attribute of the event).
        telemetry: Where to emit; :data:`PLANNING_TELEMETRY` when None.
        retry: Retries that preceded this plan (``hall_retry``), when in a retry loop.
        max_retries: The retry budget (``max_hall_retries``), when in a retry loop.
        duration_ms: Time spent so far, for the log line.
    """
    if not result.hallucinations:
        return
    t = telemetry or PLANNING_TELEMETRY
    catalog = result.allowed
    first_per_name: dict[str | None, PlanIssue] = {}
    for issue in result.hallucinations:
        first_per_name.setdefault(issue.tool, issue)
    for issue in first_per_name.values():
        capability = (issue.capability
                      if issue.error_type is PlanErrorType.HALLUCINATED_CAPABILITY else None)
        t.event(names.EVENT_HALLUCINATION_DETECTED, request_id, {
            names.ATTR_HALLUCINATED_AGENT: issue.tool,
            names.ATTR_AGENT: issue.tool,
            names.ATTR_HALLUCINATED_CAPABILITY: capability,
            names.ATTR_ALLOWED_AGENT_COUNT: catalog.agent_count,
            names.ATTR_HALL_RETRY: retry,
            names.ATTR_MAX_HALL_RETRIES: max_retries,
            names.ATTR_SUGGESTED_TOOLS: list(issue.suggested_tools),
            names.ATTR_ERROR_TYPE: str(issue.error_type),
        })
        t.count(names.METRIC_HALLUCINATIONS, agent=issue.tool)
    hallucinated = list(result.hallucinated_names)
    fields: dict[str, Any] = {
        names.ATTR_HALLUCINATED_AGENT: hallucinated[0] if hallucinated else None,
        names.ATTR_HALLUCINATED_AGENTS: hallucinated,
        names.ATTR_ALLOWED_AGENTS: list(catalog.names),
    }
    if retry is not None:
        fields[names.ATTR_HALL_RETRY] = retry
    if max_retries is not None:
        fields[names.ATTR_MAX_HALL_RETRIES] = max_retries
    t.log(logging.WARNING, "LLM planner hallucinated a tool not in its allowed list",
          request_id=request_id, status=STATUS_DETECTED,
          error="; ".join(e.message for e in result.hallucinations),
          duration_ms=duration_ms, **fields)


def validate_plan(plan: Any, allowed: Any, *, request_id: str | None = None,
                  telemetry: GuardTelemetry | None = None,
                  emit: bool = True) -> PlanValidationResult:
    """Check every step of ``plan`` against ``allowed`` and its dependency structure.

    A zero-step plan is valid: it is the sanctioned answer when no allowed tool fits.
    When the plan names a tool, agent or capability it was not given, the detection is
    emitted (see the module docstring) unless ``emit`` is False; a failure to emit never
    changes the result.

    Args:
        plan: A list of steps, an orchestrator plan object, tool calls or a model
            response or message holding them (see the module docstring), or a JSON
            string of any of these.
        allowed: The exact tools/agents the planner was shown, in any accepted form
            (see :mod:`guardtrace.collectors.plans.allowed_tools`), or an :class:`AllowedTools`.
        request_id: The request id of the emitted telemetry; the current trace id or a
            random id when None.
        telemetry: Where to emit; the planning module's telemetry when None.
        emit: False to emit nothing (the retry loop reports detections itself; offline
            scans measure rather than observe).

    Returns:
        The result; ``result.valid`` is False when there is any finding.

    Raises:
        GuardInputError: ``plan`` or ``allowed`` cannot be interpreted; the message says
            what and where, e.g. ``"plan step 2: missing 'tool' (or 'agent_name')"``.
    """
    started = time.perf_counter()
    result = _check(_parse_plan(plan), AllowedTools.parse(allowed))
    if emit and result.hallucinations:
        report_hallucinations(result, request_id=request_id or new_request_id(),
                              telemetry=telemetry,
                              duration_ms=(time.perf_counter() - started) * 1000.0)
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
            errors.append(_unknown_tool_issue(step, catalog))
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
        # An offline scan measures; it is not an agent's live telemetry.
        result = validate_plan(obj["plan"], catalog, emit=False)
    except GuardInputError as exc:
        raise GuardInputError(f"{label}: {exc}") from exc
    return {
        "id": record_id,
        "valid": result.valid,
        "errors": [{key: found[key] for key in _SCAN_ERROR_KEYS}
                   for found in (issue.to_dict() for issue in result.errors)],
    }
