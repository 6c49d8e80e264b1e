"""Every name that crosses the wire, defined once.

Collectors emit these names, consumers parse them into columns, the dashboard queries
them. Changing one here changes it everywhere, which is the point.
"""

from __future__ import annotations

from typing import Final

# --- Kafka topics -------------------------------------------------------------------
# The OpenTelemetry Collector's Kafka exporter uses these defaults, so a Collector can
# write topics our consumers read and read topics our exporters write.
SPANS_TOPIC: Final = "otlp_spans"
METRICS_TOPIC: Final = "otlp_metrics"
PAYLOADS_TOPIC: Final = "guardtrace_payloads"
# OTLP logs (GenAI log events such as gen_ai.client.inference.operation.details).
LOGS_TOPIC: Final = "otlp_logs"
DEAD_LETTER_TOPIC: Final = "guardtrace_dead_letters"

# Kafka record headers.
HEADER_CONTENT_TYPE: Final = "content-type"
HEADER_DLQ_ERROR: Final = "guardtrace.error"
HEADER_DLQ_SOURCE_TOPIC: Final = "guardtrace.source_topic"
HEADER_DLQ_SOURCE_PARTITION: Final = "guardtrace.source_partition"
HEADER_DLQ_SOURCE_OFFSET: Final = "guardtrace.source_offset"
CONTENT_TYPE_OTLP_PROTO: Final = b"application/x-protobuf"
CONTENT_TYPE_PAYLOAD: Final = b"application/vnd.guardtrace.payload+json;zstd"

# --- Instrumentation scope ----------------------------------------------------------
INSTRUMENTATION_NAME: Final = "guardtrace"

# --- Forced verification's tool -------------------------------------------------------
# The tool the questions family offers and the replies family reads as a check done.
REASON_TOOL_NAME: Final = "reason"

# --- Span events --------------------------------------------------------------------
# Family 1: hallucinated tools and agents in plans (names from the field report).
EVENT_HALLUCINATION_DETECTED: Final = "llm.hallucination_detected"
EVENT_HALLUCINATION_REGENERATION_COMPLETE: Final = "llm.hallucination_regeneration_complete"
EVENT_HALLUCINATION_REGENERATION_FAILED: Final = "llm.hallucination_regeneration_failed"
EVENT_HALLUCINATION_RECOVERED: Final = "llm.hallucination_recovered"
EVENT_HALLUCINATION_UNRECOVERABLE: Final = "llm.hallucination_unrecoverable"
# Family 2: fabricated actions and self-repetition.
EVENT_FABRICATION_DETECTED: Final = "llm.fabrication_detected"
# Family 3: forced verification of hallucination-prone questions.
EVENT_VERIFICATION_REQUIRED: Final = "llm.verification_required"
EVENT_VERIFICATION_NUDGED: Final = "llm.verification_nudged"
EVENT_VERIFICATION_COMPLETED: Final = "llm.verification_completed"
EVENT_VERIFICATION_BYPASSED: Final = "llm.verification_bypassed"
# Every guard verdict, pass or fail, also as an OpenTelemetry GenAI evaluation result, so a
# backend that shows evaluations shows guardtrace's (semantic conventions, gen_ai.*).
EVENT_EVALUATION_RESULT: Final = "gen_ai.evaluation.result"
# The OpenTelemetry GenAI log event that carries one LLM call's messages (instrumentations
# such as opentelemetry-instrumentation-openai-v2 send it on the logs topic, not the span).
EVENT_GENAI_OPERATION_DETAILS: Final = "gen_ai.client.inference.operation.details"
# The smoke-test event of `guardtrace emit-test`.
EVENT_EMIT_TEST: Final = "guardtrace.emit_test"

GUARD_EVENTS: Final = (
    EVENT_HALLUCINATION_DETECTED,
    EVENT_HALLUCINATION_REGENERATION_COMPLETE,
    EVENT_HALLUCINATION_REGENERATION_FAILED,
    EVENT_HALLUCINATION_RECOVERED,
    EVENT_HALLUCINATION_UNRECOVERABLE,
    EVENT_FABRICATION_DETECTED,
    EVENT_VERIFICATION_REQUIRED,
    EVENT_VERIFICATION_NUDGED,
    EVENT_VERIFICATION_COMPLETED,
    EVENT_VERIFICATION_BYPASSED,
)

# --- Metrics (counters) -------------------------------------------------------------
METRIC_HALLUCINATIONS: Final = "plan_generation.hallucinations"
METRIC_HALLUCINATION_RECOVERED: Final = "plan_generation.hallucination_recovered"
METRIC_HALLUCINATION_UNRECOVERABLE: Final = "plan_generation.hallucination_unrecoverable"
METRIC_FABRICATIONS: Final = "reply_guard.fabrications"
METRIC_VERIFICATION_REQUIRED: Final = "verification.required"
METRIC_VERIFICATION_NUDGED: Final = "verification.nudged"
METRIC_VERIFICATION_COMPLETED: Final = "verification.completed"
METRIC_VERIFICATION_BYPASSED: Final = "verification.bypassed"
# Self-observability of the collector side.
METRIC_LABEL_OVERFLOW: Final = "guardtrace.label_overflow"
METRIC_PAYLOADS_DROPPED: Final = "guardtrace.payloads_dropped"
METRIC_PAYLOADS_SENT: Final = "guardtrace.payloads_sent"
METRIC_EXPORT_DROPPED: Final = "guardtrace.export_dropped"
METRIC_HOOK_ERRORS: Final = "guardtrace.hook_errors"
METRIC_EMIT_TEST: Final = "guardtrace.emit_test"

# --- Attribute keys and metric labels ----------------------------------------------
ATTR_REQUEST_ID: Final = "request_id"  # always the first attribute of a guard event
ATTR_MODULE: Final = "module"
ATTR_AGENT: Final = "agent"
ATTR_OPERATION: Final = "operation"
ATTR_ERROR: Final = "error"
ATTR_STATUS: Final = "status"
ATTR_DURATION_MS: Final = "duration_ms"
ATTR_METRIC: Final = "metric"
ATTR_REASON: Final = "reason"
# Where a log record's event name travels when the record predates OTLP's event_name field.
ATTR_EVENT_NAME: Final = "event.name"
# Family 1
ATTR_HALLUCINATED_AGENT: Final = "hallucinated_agent"
ATTR_HALLUCINATED_CAPABILITY: Final = "hallucinated_capability"
ATTR_ALLOWED_AGENT_COUNT: Final = "allowed_agent_count"
ATTR_SUGGESTED_TOOLS: Final = "suggested_tools"
ATTR_HALL_RETRY: Final = "hall_retry"
ATTR_MAX_HALL_RETRIES: Final = "max_hall_retries"
ATTR_RETRIES_USED: Final = "retries_used"
ATTR_RETRIES_EXHAUSTED: Final = "retries_exhausted"
ATTR_ERROR_TYPE: Final = "error_type"
ATTR_HALLUCINATED_AGENTS: Final = "hallucinated_agents"  # log/payload field: all names
ATTR_ALLOWED_AGENTS: Final = "allowed_agents"  # log/payload field: the list shown
# Family 2
ATTR_TIER: Final = "tier"
ATTR_MATCHED_PHRASE: Final = "matched_phrase"
# Between the phrases of one finding's evidence (two claims of one tier: "I've booked;
# and emailed"); readers that place the evidence in the reply split on it.
EVIDENCE_SEPARATOR: Final = "; "
ATTR_TOOLS_FIRED: Final = "tools_fired"
ATTR_SIMILARITY: Final = "similarity"
ATTR_CHANNEL: Final = "channel"
# Values of the family 2 `tier` attribute and label.
TIER_ACTION: Final = "action"
TIER_READ: Final = "read"
TIER_REPETITION: Final = "repetition"
# A tool call written out as text (JSON, a tag, "Action:", tool(...)) while none was made.
TIER_TEXT_TOOL_CALL: Final = "text_tool_call"
# Concrete values (ids, amounts, times) that no tool result, user or system prompt gave.
TIER_UNGROUNDED_RESULT: Final = "ungrounded_result"
# Family 3
ATTR_TRIGGER_PATTERN: Final = "trigger_pattern"
ATTR_DEPTH: Final = "depth"
ATTR_SCORE: Final = "score"
ATTR_TOOL_CALLS_USED: Final = "tool_calls_used"
ATTR_MIN_TOOL_CALLS: Final = "min_tool_calls"
ATTR_TURNS_USED: Final = "turns_used"
ATTR_FAMILY: Final = "family"  # which pattern family of the criticality gate matched
ATTR_NUDGES: Final = "nudges"  # nudges injected so far in this loop

# Where a guard event was found: in the agent's process by a hook or adapter, or by the
# consumers in GenAI telemetry the agent already emits (no guardtrace code in the agent).
ATTR_FOUND_IN: Final = "found_in"
FOUND_IN_AGENT: Final = "agent"
FOUND_IN_PIPELINE: Final = "pipeline"
# The GenAI evaluation result event's attributes (OpenTelemetry semantic conventions).
ATTR_EVALUATION_NAME: Final = "gen_ai.evaluation.name"
ATTR_EVALUATION_SCORE_LABEL: Final = "gen_ai.evaluation.score.label"
ATTR_EVALUATION_SCORE_VALUE: Final = "gen_ai.evaluation.score.value"
ATTR_EVALUATION_EXPLANATION: Final = "gen_ai.evaluation.explanation"
# guardtrace's evaluations, one per guard family, and their labels (score 1.0 pass, 0.0 fail).
EVALUATION_PLAN_TOOLS: Final = "guardtrace.plan_tools"
EVALUATION_FABRICATION: Final = "guardtrace.fabrication"
EVALUATION_VERIFICATION: Final = "guardtrace.verification"
EVALUATION_PASS: Final = "pass"
EVALUATION_FAIL: Final = "fail"

# The label value that replaces agent names beyond the cardinality cap.
OVERFLOW_LABEL: Final = "__other__"

# --- Modules (the `module` label) ---------------------------------------------------
MODULE_PLANNING: Final = "planning"
MODULE_REPLIES: Final = "replies"
MODULE_VERIFICATION: Final = "verification"

# --- Debug payload kinds -----------------------------------------------------------
PAYLOAD_KIND_HALLUCINATION: Final = "hallucination_detection"
PAYLOAD_KIND_FABRICATION: Final = "fabrication_detection"
PAYLOAD_KIND_VERIFICATION: Final = "verification"
PAYLOAD_KIND_EMIT_TEST: Final = "emit_test"
# An agent's own record of one LLM call (prompt and response), via record_payload().
PAYLOAD_KIND_LLM_EXCHANGE: Final = "llm_exchange"

# Marker appended to text cut by a size limit (payload previews, oversized bodies).
TRUNCATION_MARKER: Final = "…[truncated by guardtrace]"
REDACTION_MARKER_FORMAT: Final = "[REDACTED:{kind}]"
