"""``guardtrace scan conversations``: every assistant reply of archived conversations.

Input: JSONL, one conversation per line, in the shape of public agent traces
(``{"id", "tools", "messages"}``; other fields are ignored). ``messages`` is a list in
OpenAI chat or Anthropic messages shape, tool results included; ``tools`` is the catalog
in any shape :func:`~guardtrace.collectors.tool_catalog.read_tool_specs` reads (absent or
null: unknown); an optional ``system`` holds a system prompt kept apart (Anthropic).

Output: one object per assistant message that has text, in order:
``{"conv_id", "msg_index", "tiers", "evidence"}`` where ``msg_index`` counts from 0 over
``messages``, ``tiers`` is a subset of ``action``, ``read``, ``text_tool_call``,
``ungrounded_result``, ``repetition`` and ``evidence`` maps each fired tier to the words
that fired it. Text the framework wrote (``"x-canned": true``) is listed with no tiers:
the model did not say it.

This contract is held fixed: it is how the detectors are measured, on the dev set in
``benchmarks/detection_quality.py`` and on conversations this team never sees.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..collectors.errors import GuardInputError, require_object
from ..collectors.replies.conversation import read_conversation
from ..collectors.replies.conversation_guard import ConversationDetector

__all__ = ["scan_conversation_input"]

_DETECTOR = ConversationDetector()


def scan_conversation_input(obj: Mapping[str, Any], *,
                            detector: ConversationDetector | None = None) -> list[dict[str, Any]]:
    """Judge every assistant reply of one archived conversation.

    Args:
        obj: ``{"id", "tools"?, "messages", "system"?}``.
        detector: Configuration to use; the defaults when None.

    Returns:
        One ``{"conv_id", "msg_index", "tiers", "evidence"}`` per assistant message with
        text, in message order.

    Raises:
        GuardInputError: ``obj`` is not an object, ``messages`` is missing or not a list,
            a message cannot be read, or ``tools`` is not a tool list.
    """
    require_object(obj, "conversation record must be an object")
    conv_id = obj.get("id")
    where = f"conversation {conv_id!r}" if conv_id is not None else "conversation"
    if "messages" not in obj:
        raise GuardInputError(f"{where}: missing 'messages'")
    messages = obj["messages"]
    if not isinstance(messages, list):
        raise GuardInputError(f"{where}: 'messages' must be a list, got "
                              f"{type(messages).__name__}")
    try:
        judged = (detector or _DETECTOR).judge(messages, obj.get("tools"),
                                               system=obj.get("system"))
        canned = [m.index for m in read_conversation(messages).messages
                  if m.role == "assistant" and m.canned and m.text.strip()]
    except GuardInputError as exc:
        raise GuardInputError(f"{where}: {exc}") from None
    out = [{"conv_id": conv_id, "msg_index": v.msg_index, "tiers": list(v.tiers),
            "evidence": {f.tier: f.evidence for f in v.findings}} for v in judged]
    out += [{"conv_id": conv_id, "msg_index": i, "tiers": [], "evidence": {}} for i in canned]
    return sorted(out, key=lambda v: v["msg_index"])
