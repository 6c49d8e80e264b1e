"""The ``reason`` tool: its definition in each API style, its prompt, and the nudge.

What the model sees of forced verification (:mod:`~guardtrace.collectors.questions.verification`):
the ``reason`` tool offered on every request (:func:`ensure_reason_tool`), the prompt
that executes it (:data:`REASON_SYSTEM_PROMPT`: restate, enumerate, distrust the obvious
answer) and the ``[REASONING BUDGET]`` message injected when the model tries to answer
before calling it (:func:`build_nudge`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from ...schemas import names
from ..errors import GuardInputError

__all__ = [
    "NUDGE_PREFIX",
    "REASON_SYSTEM_PROMPT",
    "REASON_TOOL_NAME",
    "ToolStyle",
    "build_nudge",
    "ensure_reason_tool",
    "reason_messages",
    "reason_tool_schema",
]

ToolStyle = Literal["openai", "anthropic"]

REASON_TOOL_NAME = names.REASON_TOOL_NAME
NUDGE_PREFIX = "[REASONING BUDGET]"

REASON_SYSTEM_PROMPT = (
    "You are a critical reasoning engine. Your ONLY job is to find the CORRECT answer "
    "through rigorous step-by-step verification.\n\n"
    "MANDATORY PROCESS:\n"
    "1. Restate exactly what is being asked, with no assumptions.\n"
    "2. Verify every factual claim by enumeration: spell words out letter by letter, "
    "list all candidate items, count explicitly.\n"
    "3. Check whether the obvious answer actually satisfies the question.\n"
    "4. If the obvious answer is wrong, say so clearly. If no item satisfies the "
    "question, say that none does.\n"
    "5. State your verified conclusion together with the evidence.\n\n"
    "CRITICAL: Do NOT trust your intuition. Do NOT skip verification steps. The user is "
    "asking because the first model already got this wrong."
)

_REASON_DESCRIPTION = (
    "Verify the answer to a question step by step before replying: restates the "
    "question, enumerates (spells words letter by letter, lists and counts items) and "
    "checks whether the obvious answer is actually right. Call it with the user's exact "
    "question for spelling, counting, letter and 'which/what X' questions."
)

# The one definition both renderings are built from.
_REASON_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "question": {
            "type": "string",
            "description": "The user's question, verbatim.",
        },
        "context": {
            "type": "string",
            "description": "Optional facts from the conversation the answer depends on.",
        },
    },
    "required": ["question"],
    "additionalProperties": False,
}

# Long questions are cut in the nudge: it must stay a short instruction, and the model
# has the full question in the conversation anyway.
_NUDGE_QUESTION_CHARS = 500


def reason_tool_schema(style: ToolStyle = "openai") -> dict[str, Any]:
    """The ``reason`` tool definition rendered for one API style (a fresh copy).

    Args:
        style: ``openai`` (``{"type": "function", "function": {...}}``) or ``anthropic``
            (``{"name", "description", "input_schema"}``).

    Raises:
        GuardInputError: Unknown ``style``.
    """
    parameters = copy.deepcopy(_REASON_PARAMETERS)
    if style == "openai":
        return {"type": "function", "function": {
            "name": REASON_TOOL_NAME, "description": _REASON_DESCRIPTION,
            "parameters": parameters}}
    if style == "anthropic":
        return {"name": REASON_TOOL_NAME, "description": _REASON_DESCRIPTION,
                "input_schema": parameters}
    raise GuardInputError(f"unknown tool style {style!r}; expected 'openai' or 'anthropic'")


def _tool_name(tool: Any) -> str | None:
    # Chat Completions nests the name under "function"; Anthropic and the Responses API
    # keep it at the top. Anything else (SDK objects, junk) has no name we can see.
    if not isinstance(tool, Mapping):
        return getattr(tool, "name", None)
    function = tool.get("function")
    if isinstance(function, Mapping) and "name" in function:
        return function.get("name")
    return tool.get("name")


def ensure_reason_tool(tools: Iterable[Any] | None,
                       style: ToolStyle = "openai") -> list[Any]:
    """Return ``tools`` with the ``reason`` tool appended unless one is already there.

    The reason tool is offered on every request (the seed's "essential tool"), not only
    when the gate fires: the model can verify itself on questions no pattern covers.
    The input is not modified.

    Args:
        tools: Tool definitions in either style (a tool named ``reason`` in any style
            counts as present).
        style: The style to render the added tool in.

    Raises:
        GuardInputError: Unknown ``style``.
    """
    out = list(tools or ())
    if any(_tool_name(tool) == REASON_TOOL_NAME for tool in out):
        return out
    out.append(reason_tool_schema(style))
    return out


def reason_messages(question: str, context: str | None = None) -> list[dict[str, str]]:
    """Messages for executing the ``reason`` tool: the verification prompt, then the task.

    Anthropic-style callers pass ``messages[0]["content"]`` as ``system`` and the rest
    as ``messages``.
    """
    task = f"Question: {question}"
    if context:
        task += f"\n\nContext:\n{context}"
    return [{"role": "system", "content": REASON_SYSTEM_PROMPT},
            {"role": "user", "content": task}]


def build_nudge(question: str, tool_names: Sequence[str] = (REASON_TOOL_NAME,)) -> str:
    """The ``[REASONING BUDGET]`` message injected when the model tries to finish early.

    Inject it as a system message (or a user message where the API allows no system
    messages mid-conversation).
    """
    quoted = question if len(question) <= _NUDGE_QUESTION_CHARS else (
        question[:_NUDGE_QUESTION_CHARS] + "…")
    tools = " or ".join(f"`{name}`" for name in tool_names) or f"`{REASON_TOOL_NAME}`"
    return (
        f"{NUDGE_PREFIX} You may not give a final answer yet: this question must be "
        f"verified first. You MUST call the {tools} tool IMMEDIATELY with the user's "
        f"question as the `question` argument: {quoted!r}. Do NOT call web_search, "
        "tool_search or any other tool first, and do NOT answer from memory. The tool "
        "will verify the answer step by step."
    )
