"""The adapters' settings, checked where the user passes them.

Every adapter takes some of the same settings (a retry budget, a fabrication guard, tool
kinds, on/off switches). A wrong one used to surface far from where it was given: a
string budget as ``'<' not supported``, a guard of the wrong type as a counted hook
error on every call (so nothing was checked and nothing said so), ``act="false"`` as
acting. Each check here raises at construction, naming the setting and what it takes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..collectors.replies.fabrication import FabricationGuard
from ..collectors.replies.fabrication_detector import TIERS

__all__ = ["check_flag", "check_guard", "check_retries", "check_tiers", "check_tool_kinds",
           "check_tool_list"]


def check_retries(value: Any, name: str = "tool_retries") -> int:
    """``value`` when it is an integer >= 0 (not a bool); ValueError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
    return value


def check_flag(value: Any, name: str) -> bool:
    """``value`` when it is a bool; TypeError otherwise (``"false"`` is not False)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value


def check_guard(guard: Any) -> FabricationGuard | None:
    """``guard`` when it is None or a FabricationGuard; TypeError otherwise."""
    if guard is not None and not isinstance(guard, FabricationGuard):
        raise TypeError(f"guard must be a guardtrace FabricationGuard, got "
                        f"{type(guard).__name__}")
    return guard


def check_tool_kinds(tool_kinds: Any) -> Mapping[str, Any] | None:
    """``tool_kinds`` when it is None or a mapping of tool name to kind; TypeError
    otherwise (the kinds themselves are checked by the detector)."""
    if tool_kinds is not None and not isinstance(tool_kinds, Mapping):
        raise TypeError(f"tool_kinds must map tool names to 'read', 'write', 'both' or "
                        f"'none' (e.g. guardtrace.integrations.mcp.tool_kinds(tools)), got "
                        f"{type(tool_kinds).__name__}")
    return tool_kinds


def check_tiers(tiers: Any, name: str) -> frozenset[str]:
    """``tiers`` as a set when each is a fabrication tier; TypeError for a lone string
    (it would be read letter by letter), ValueError naming the unknown ones."""
    if isinstance(tiers, (str, bytes)) or not isinstance(tiers, Iterable):
        raise TypeError(f"{name} must be a list of fabrication tiers (some of {TIERS}), "
                        f"got {tiers!r}")
    found = frozenset(tiers)
    unknown = sorted(str(tier) for tier in found - set(TIERS))
    if unknown:
        raise ValueError(f"{name}: unknown tiers {unknown}; expected some of {TIERS}")
    return found


def check_tool_list(tools: Any, name: str = "tools") -> None:
    """TypeError when ``tools`` is not a list of tools: a lone string or definition
    would be read item by item (letters, keys) as tool names."""
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Iterable):
        raise TypeError(f"{name} must be a list of tools, got {type(tools).__name__}")
