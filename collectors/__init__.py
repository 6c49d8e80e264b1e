"""guardtrace's hook package: what an agent imports.

Three guards decide whether an LLM hallucinated and act on it:

* plans: :func:`validate_plan` finds invented tools/agents and broken dependencies;
  :func:`generate_validated_plan` drives a bounded, feedback-first retry to recovery.
* replies: :class:`FabricationGuard` judges a reply within its conversation: claimed
  actions and lookups no tool performed, tool calls typed as text, values no source
  gave, and loops, appending an inline disclaimer.
* questions: :class:`VerificationLoop` (with :class:`CriticalityGate`) forces the
  ``reason`` tool on hallucination-prone questions before the model may answer.

Every decision emits the same telemetry: a span event with ``request_id`` first, a
counter with a capped ``agent`` label, a structured log line and a debug payload.
Nothing needs :func:`configure`: unconfigured, guards still decide, and emit into the
OTel no-op API. Importing the hooks loads neither the OpenTelemetry SDK nor the Kafka
client: ``configure`` does, and the export classes below load on first access.

    from guardtrace import collectors
    collectors.configure(kafka_bootstrap="kafka:9092", service_name="travel-agent")
"""

from typing import TYPE_CHECKING, Any

from .config import CollectorConfig
from .emit.cardinality import AgentLabelLimiter
from .emit.redaction import Redactor
from .emit.telemetry import GuardTelemetry, new_request_id, record_payload
from .errors import GuardInputError
from .setup import Telemetry, configure, force_flush, shutdown

__all__ = [
    "AgentLabelLimiter",
    "BudgetToken",
    "CollectorConfig",
    "ConversationDetector",
    "CriticalityDecision",
    "CriticalityGate",
    "FabricationDetector",
    "FabricationGuard",
    "FabricationVerdict",
    "GuardInputError",
    "GuardTelemetry",
    "InMemoryReplyHistory",
    "KafkaLogExporter",
    "KafkaMetricExporter",
    "KafkaPayloadSink",
    "KafkaSpanExporter",
    "PlanAttempt",
    "PlanGenerationError",
    "PlanHallucinationError",
    "PlanRetryConfig",
    "PlanValidationResult",
    "ReasoningDepth",
    "Redactor",
    "ReplyHistory",
    "ReplyVerdict",
    "Telemetry",
    "ToolSpec",
    "TurnAction",
    "ValidatedPlan",
    "VerificationLoop",
    "VerificationOutcome",
    "configure",
    "detect_fabrication",
    "ensure_reason_tool",
    "force_flush",
    "generate_validated_plan",
    "judge_conversation",
    "new_request_id",
    "read_tool_specs",
    "reason_tool_schema",
    "record_payload",
    "shutdown",
    "tool_names_fired",
    "tool_names_from_anthropic",
    "tool_names_from_openai",
    "validate_plan",
]

# Loaded on first access, not on import, so an agent pays only for what it uses: each
# guard family (its patterns compile as its modules load), and the export path
# (kafka-python, the OTLP encoders), which `configure` or these class names bring in.
_LAZY_EXPORTS = {
    "PlanAttempt": ".plans.retry",
    "PlanGenerationError": ".plans.retry",
    "PlanHallucinationError": ".plans.retry",
    "PlanRetryConfig": ".plans.retry",
    "ValidatedPlan": ".plans.retry",
    "generate_validated_plan": ".plans.retry",
    "PlanValidationResult": ".plans.validation",
    "validate_plan": ".plans.validation",
    "CriticalityDecision": ".questions.criticality",
    "CriticalityGate": ".questions.criticality",
    "ReasoningDepth": ".questions.criticality",
    "BudgetToken": ".questions.verification",
    "TurnAction": ".questions.verification",
    "VerificationLoop": ".questions.verification",
    "VerificationOutcome": ".questions.verification",
    "ensure_reason_tool": ".questions.verification",
    "reason_tool_schema": ".questions.verification",
    "ConversationDetector": ".replies.conversation_guard",
    "ReplyVerdict": ".replies.conversation_guard",
    "judge_conversation": ".replies.conversation_guard",
    "FabricationDetector": ".replies.fabrication",
    "FabricationGuard": ".replies.fabrication",
    "FabricationVerdict": ".replies.fabrication",
    "detect_fabrication": ".replies.fabrication",
    "InMemoryReplyHistory": ".replies.reply_history",
    "ReplyHistory": ".replies.reply_history",
    "tool_names_fired": ".tool_calls",
    "tool_names_from_anthropic": ".tool_calls",
    "tool_names_from_openai": ".tool_calls",
    "ToolSpec": ".tool_catalog",
    "read_tool_specs": ".tool_catalog",
    "KafkaLogExporter": ".export.kafka_exporters",
    "KafkaMetricExporter": ".export.kafka_exporters",
    "KafkaSpanExporter": ".export.kafka_exporters",
    "KafkaPayloadSink": ".export.payload_sink",
}

if TYPE_CHECKING:
    from .export.kafka_exporters import KafkaLogExporter, KafkaMetricExporter, KafkaSpanExporter
    from .export.payload_sink import KafkaPayloadSink
    from .plans.retry import (
        PlanAttempt,
        PlanGenerationError,
        PlanHallucinationError,
        PlanRetryConfig,
        ValidatedPlan,
        generate_validated_plan,
    )
    from .plans.validation import PlanValidationResult, validate_plan
    from .questions.criticality import CriticalityDecision, CriticalityGate, ReasoningDepth
    from .questions.verification import (
        BudgetToken,
        TurnAction,
        VerificationLoop,
        VerificationOutcome,
        ensure_reason_tool,
        reason_tool_schema,
    )
    from .replies.conversation_guard import ConversationDetector, ReplyVerdict, judge_conversation
    from .replies.fabrication import (
        FabricationDetector,
        FabricationGuard,
        FabricationVerdict,
        detect_fabrication,
    )
    from .replies.reply_history import InMemoryReplyHistory, ReplyHistory
    from .tool_calls import tool_names_fired, tool_names_from_anthropic, tool_names_from_openai
    from .tool_catalog import ToolSpec, read_tool_specs


def __getattr__(name: str) -> Any:
    module = _LAZY_EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY_EXPORTS))
