"""The reader of one LLM call's GenAI telemetry, now :mod:`guardtrace.schemas.genai_exchange`.

It moved below the consumers so the dashboard, which may not import them, reads LLM
spans with the same code the detectors use. Its names stay importable from here.
"""

from __future__ import annotations

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
    "GenAIExchange",
    "read_exchange",
]
