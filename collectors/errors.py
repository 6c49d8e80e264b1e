"""Errors the hook package raises on purpose, and the input checks that raise them.

Every guard that reads caller input (plans, allowed lists, scanner records) reports a
problem the same way: a :class:`GuardInputError` whose message says where and what,
built by the helpers here so the wording stays consistent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["GuardInputError", "is_mapping", "loads_json", "record_label", "require_object",
           "require_text"]


class GuardInputError(ValueError):
    """Input a guard cannot interpret (a plan that is not JSON, a step without a tool).

    The message names what is wrong and where, e.g. ``"plan step 2: missing 'tool'"``.
    """


def loads_json(text: str, problem: str) -> Any:
    """``json.loads(text)``; on failure, GuardInputError ``"<problem> (line L, column C: why)"``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise GuardInputError(
            f"{problem} (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None


def is_mapping(obj: Any) -> bool:
    """Whether ``obj`` reads as a JSON object (a dict or any other Mapping)."""
    # Most inputs are plain dicts; the ABC check is several times slower.
    return type(obj) is dict or isinstance(obj, Mapping)


def require_object(obj: Any, expected: str) -> Mapping[str, Any]:
    """``obj`` if it is a mapping, else GuardInputError ``"<expected>, got <type>"``."""
    if not isinstance(obj, Mapping):
        raise GuardInputError(f"{expected}, got {type(obj).__name__}")
    return obj


def record_label(obj: Mapping[str, Any], noun: str) -> str:
    """How messages name a scanner record: ``"<noun> <id>"``, or ``noun`` without an id."""
    record_id = obj.get("id")
    return f"{noun} {record_id!r}" if record_id is not None else noun


def require_text(obj: Mapping[str, Any], key: str, label: str) -> str:
    """The string field ``key`` of ``obj``; GuardInputError if missing or not a string."""
    if key not in obj:
        raise GuardInputError(f"{label}: missing '{key}'")
    value = obj[key]
    if not isinstance(value, str):
        raise GuardInputError(f"{label}: '{key}' must be a string, got {type(value).__name__}")
    return value
