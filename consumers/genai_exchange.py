"""The reader of one LLM call's GenAI telemetry, and what a span above the call declares.

:func:`read_exchange` lives in :mod:`guardtrace.schemas.genai_exchange` (below the
consumers, so the dashboard, which may not import them, reads LLM spans with the same
code the detectors use); its names stay importable from here.

:func:`read_enclosing_agent` is the pipeline's own: the tools and the agent name a span
above LLM calls declares for them. An agent framework's ``invoke_agent`` span (GenAI
conventions) carries ``gen_ai.tool.definitions`` and ``gen_ai.agent.name``, while an
instrumentation such as ``opentelemetry-instrumentation-openai-v2`` 2.4b0 records no
tool definitions on the call's own span: without the agent span's, an invented tool
cannot be told from an offered one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..schemas.genai_exchange import (
    CONVENTION_GENAI,
    CONVENTION_OPENINFERENCE,
    GENAI_AGENT_NAME,
    GENAI_CONVERSATION_ID,
    GENAI_INFERENCE_OPERATIONS,
    GENAI_INPUT_MESSAGES,
    GENAI_OPERATION,
    GENAI_OUTPUT_MESSAGES,
    GENAI_REQUEST_MODEL,
    GENAI_RESPONSE_ID,
    GENAI_RESPONSE_MODEL,
    GENAI_SYSTEM_INSTRUCTIONS,
    GENAI_TOOL_DEFINITIONS,
    OI_INPUT_MESSAGES,
    OI_KIND_LLM,
    OI_MODEL,
    OI_OUTPUT_MESSAGES,
    OI_REDACTED,
    OI_SPAN_KIND,
    OI_TOOL_SCHEMA,
    OI_TOOLS,
    PROBLEM_BAD_JSON,
    PROBLEM_MISSING_INDEX,
    PROBLEM_NOT_CAPTURED,
    PROBLEM_UNEXPECTED_SHAPE,
    GenAIExchange,
    read_exchange,
)

__all__ = [
    "CONVENTION_GENAI",
    "CONVENTION_OPENINFERENCE",
    "GENAI_AGENT_NAME",
    "GENAI_CONVERSATION_ID",
    "GENAI_INFERENCE_OPERATIONS",
    "GENAI_INPUT_MESSAGES",
    "GENAI_OPERATION",
    "GENAI_OUTPUT_MESSAGES",
    "GENAI_REQUEST_MODEL",
    "GENAI_RESPONSE_ID",
    "GENAI_RESPONSE_MODEL",
    "GENAI_SYSTEM_INSTRUCTIONS",
    "GENAI_TOOL_DEFINITIONS",
    "OI_INPUT_MESSAGES",
    "OI_KIND_LLM",
    "OI_MODEL",
    "OI_OUTPUT_MESSAGES",
    "OI_REDACTED",
    "OI_SPAN_KIND",
    "OI_TOOLS",
    "OI_TOOL_SCHEMA",
    "PROBLEM_BAD_JSON",
    "PROBLEM_MISSING_INDEX",
    "PROBLEM_NOT_CAPTURED",
    "PROBLEM_UNEXPECTED_SHAPE",
    "EnclosingAgent",
    "GenAIExchange",
    "read_enclosing_agent",
    "read_exchange",
]


# Agent spans repeat the same definitions byte for byte on every turn: each distinct text
# is parsed once and the same list object handed out, so the detectors' caches (kept per
# list object) hit.
_TOOLS_CACHE_ENTRIES = 256
_tools_cache: dict[Any, list[Any]] = {}
_SCHEMA_SUFFIX = f".{OI_TOOL_SCHEMA}"


@dataclass(frozen=True)
class EnclosingAgent:
    """What a span above LLM calls (an agent's ``invoke_agent`` span) declares for them.

    Attributes:
        tools: The tool definitions it offers, as recorded (as
            :attr:`GenAIExchange.tools`): empty when it records none, None when they
            could not be read (see ``problem_details``).
        agent_name: ``gen_ai.agent.name`` ("" when absent).
        problem_details: What could not be read, one detail per ``PROBLEM_*`` kind.
    """

    tools: list[Any] | None
    agent_name: str = ""
    problem_details: Mapping[str, str] = field(default_factory=dict)


def read_enclosing_agent(attributes: Mapping[str, str]) -> EnclosingAgent | None:
    """The tools and the agent name a span declares for the LLM calls below it, or None.

    Tool definitions are read in either convention: ``gen_ai.tool.definitions`` (a JSON
    list), else ``llm.tools.N.tool.json_schema`` (one JSON object each).

    Args:
        attributes: One span's attributes, values as text, as the consumers store them.

    Returns:
        None when the span declares neither tools nor an agent name (most spans: two or
        three dict lookups). Never raises on what the attributes hold.
    """
    name = attributes.get(GENAI_AGENT_NAME, "")
    definitions = attributes.get(GENAI_TOOL_DEFINITIONS)
    first_schema = f"{OI_TOOLS}0{_SCHEMA_SUFFIX}"
    if definitions is not None:
        tools, problems = _definitions(definitions)
    elif first_schema in attributes:
        tools, problems = _schemas(attributes)
    elif name:
        tools, problems = [], {}
    else:
        return None
    return EnclosingAgent(tools, name, problems)


def _definitions(text: str) -> tuple[list[Any] | None, dict[str, str]]:
    hit = _tools_cache.get(text)
    if hit is not None:
        return hit, {}
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        return None, {PROBLEM_BAD_JSON: f"{GENAI_TOOL_DEFINITIONS}: {exc}"}
    if not isinstance(parsed, list):
        return None, {PROBLEM_UNEXPECTED_SHAPE: f"{GENAI_TOOL_DEFINITIONS}: a JSON "
                                                f"{type(parsed).__name__}, not a list"}
    return _remember(text, parsed), {}


def _schemas(attributes: Mapping[str, str]) -> tuple[list[Any] | None, dict[str, str]]:
    indexed: dict[str, str] = {}
    for key, value in attributes.items():
        if key.startswith(OI_TOOLS) and key.endswith(_SCHEMA_SUFFIX):
            indexed[key[len(OI_TOOLS):-len(_SCHEMA_SUFFIX)]] = value
    if any(str(number) not in indexed for number in range(len(indexed))):
        # An SDK's attribute limit dropped some: a partial list would call offered tools
        # invented.
        return None, {PROBLEM_MISSING_INDEX: f"{OI_TOOLS}N{_SCHEMA_SUFFIX}: indexes "
                                             f"{sorted(indexed)[:8]} are not "
                                             f"0..{len(indexed) - 1}"}
    texts = tuple(indexed[str(number)] for number in range(len(indexed)))
    hit = _tools_cache.get(texts)
    if hit is not None:
        return hit, {}
    tools = []
    for number, text in enumerate(texts):
        try:
            tools.append(json.loads(text))
        except ValueError as exc:
            return None, {PROBLEM_BAD_JSON: f"{OI_TOOLS}{number}{_SCHEMA_SUFFIX}: {exc}"}
    return _remember(texts, tools), {}


def _remember(key: Any, tools: list[Any]) -> list[Any]:
    if len(_tools_cache) >= _TOOLS_CACHE_ENTRIES:
        _tools_cache.clear()  # distinct tool lists would otherwise pile up
    _tools_cache[key] = tools
    return tools
