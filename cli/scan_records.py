"""The record adapters of ``guardtrace scan fabrication|questions|plans``: one JSON
record in, one JSON-ready verdict out, on the same guards an agent runs.

They live with the scan command, not in the hook package: an agent never reads scan
records. A malformed record raises :class:`GuardInputError` naming the record and what is
wrong, and the scan reports it and goes on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..collectors.errors import GuardInputError, record_label, require_object, require_text
from ..collectors.plans.allowed_tools import AllowedTools
from ..collectors.plans.validation import validate_plan
from ..collectors.questions.criticality import CriticalityGate, default_gate
from ..collectors.replies.fabrication import FabricationDetector, detect_fabrication
from ..schemas import names

__all__ = ["scan_fabrication_input", "scan_plan_input", "scan_question_input"]


# -- replies ----------------------------------------------------------------------------
def _string_list(obj: Mapping[str, Any], key: str, record: str) -> list[str]:
    value = obj.get(key)
    if value is None:
        return []  # absent: no tools fired / no history
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise GuardInputError(
            f"{record}: '{key}' must be a list of strings, got {type(value).__name__}")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise GuardInputError(
                f"{record}: '{key}[{i}]' must be a string, got {type(item).__name__}")
    return list(value)


def scan_fabrication_input(obj: Mapping[str, Any], *,
                           detector: FabricationDetector | None = None) -> dict[str, Any]:
    """Check one offline record, as ``guardtrace scan fabrication`` reads them.

    Args:
        obj: ``{"id", "reply", "tools_fired": [names], "history": [earlier replies,
            oldest first], "channel"?}``. ``tools_fired`` and ``history`` may be absent
            or null (no tools, no history); ``channel`` is informational (the history is
            given explicitly).
        detector: Configuration to use; the defaults when None.

    Returns:
        ``{"id", "flagged", "tiers", "matches": [{"tier", "phrase"}], "similarity"}``,
        where ``tiers`` follow :data:`TIERS` order and ``similarity`` is the share of the
        reply an earlier one repeats (rounded to 4 places) when ``repetition`` fired, else
        None.

    Raises:
        GuardInputError: ``obj`` is not a mapping, ``reply`` is missing or not a string,
            or ``tools_fired``/``history`` is not a list of strings.
    """
    require_object(obj, "fabrication scan record must be an object")
    record = record_label(obj, "record")
    reply = require_text(obj, "reply", record)
    tools = _string_list(obj, names.ATTR_TOOLS_FIRED, record)
    history = _string_list(obj, "history", record)
    verdict = detect_fabrication(reply, tools, history, detector=detector)
    return {
        "id": obj.get("id"),
        "flagged": verdict.flagged,
        "tiers": list(verdict.tiers),
        "matches": [{"tier": m.tier, "phrase": m.phrase} for m in verdict.matches],
        "similarity": None if verdict.similarity is None else round(verdict.similarity, 4),
    }


# -- questions --------------------------------------------------------------------------
def scan_question_input(obj: Mapping[str, Any],
                        gate: CriticalityGate | None = None) -> dict[str, Any]:
    """Assess one record of the offline scanner (``guardtrace scan questions``).

    Args:
        obj: ``{"id": ..., "question": "..."}``; ``id`` is optional and passed through.
        gate: The gate to use; :func:`default_gate` when omitted.

    Returns:
        ``{"id", "should_reason", "depth", "trigger_pattern"}`` with ``depth`` one of
        ``none``, ``standard``, ``verify`` and ``trigger_pattern`` None when quiet.

    Raises:
        GuardInputError: ``obj`` is not a mapping, or its ``question`` is missing or not
            a string.
    """
    require_object(obj, "question input must be an object with a 'question' string")
    question = require_text(obj, "question", record_label(obj, "question input"))
    decision = (gate or default_gate()).assess(question)
    return {
        "id": obj.get("id"),
        "should_reason": decision.should_reason,
        "depth": decision.depth.value,
        "trigger_pattern": decision.trigger_pattern,
    }


# -- plans ------------------------------------------------------------------------------
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
