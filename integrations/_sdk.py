"""What every adapter needs around the SDK it wraps: importing it, and reading its values.

Shared by all adapters (OpenAI, Anthropic, MCP, the frameworks), so an SDK's quirks are
handled once: its "not given" sentinels, its pydantic objects (turned into JSON data
for payloads), and arguments that are one-shot iterables (read once here, the SDK would
then send nothing).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import Any

__all__ = ["attr", "given", "import_sdk", "listed", "plain"]

# The classes of the SDKs' "argument not given" markers (openai/anthropic `omit`,
# `NOT_GIVEN`): they stand for a missing argument, whatever their module.
_SENTINEL_TYPES = frozenset({"NotGiven", "Omit"})
# Deeper than any real message or tool schema; past it a value is kept as its text.
_MAX_DEPTH = 64


def import_sdk(module: str, extra: str) -> ModuleType:
    """Import the SDK an adapter wraps, or fail with one message naming the extra.

    Args:
        module: The SDK's import name (``openai``).
        extra: guardtrace's extra that installs it (``openai``).

    Raises:
        ImportError: The SDK is not installed; the message says what to install.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"guardtrace.integrations.{extra} needs the {module!r} package: "
            f"pip install 'guardtrace[{extra}]'") from exc


def attr(obj: Any, key: str) -> Any:
    """``obj[key]`` for a mapping (JSON), ``obj.key`` for an SDK object; None if absent."""
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def given(value: Any) -> bool:
    """Whether an SDK argument was given: not None and not the SDK's omit marker."""
    return value is not None and type(value).__name__ not in _SENTINEL_TYPES


def listed(value: Any) -> Any:
    """A one-shot iterable argument (a generator of messages) as a list, so the guard and
    the SDK both see every element; anything else unchanged."""
    if (not given(value) or isinstance(value, (list, tuple, str, bytes, bytearray, Mapping))
            or not isinstance(value, Iterable)):
        return value
    return list(value)


def plain(value: Any, _depth: int = 0) -> Any:
    """JSON data of a value that may hold SDK objects (pydantic models), for payloads.

    Mappings become dicts, lists and tuples lists, pydantic models their JSON dump
    (``None`` fields left out, as the wire leaves them out); omit markers are dropped;
    anything else that is not JSON becomes its text.
    """
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if _depth > _MAX_DEPTH:
        return str(value)
    if isinstance(value, Mapping):
        return {str(key): plain(item, _depth + 1) for key, item in value.items()
                if given(item) or item is None}
    if isinstance(value, (list, tuple)):
        return [plain(item, _depth + 1) for item in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return plain(dump(mode="json", exclude_none=True, by_alias=True), _depth + 1)
        except Exception:  # noqa: BLE001 - a model that cannot dump itself is kept as text
            return str(value)
    return str(value)
