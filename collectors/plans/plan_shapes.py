"""The shapes a plan comes in, read into :class:`PlanStep` objects, and its dependency cycles.

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
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import GuardInputError, is_mapping, loads_json

__all__ = ["PlanStep", "find_cycles", "parse_plan"]


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


def parse_plan(plan: Any) -> list[PlanStep]:
    """The steps of ``plan`` in any accepted form, in order (see the module docstring).

    Raises:
        GuardInputError: ``plan`` cannot be interpreted; the message says what and where.
    """
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


def find_cycles(order: Sequence[str],
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
