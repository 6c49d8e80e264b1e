"""A guard event added to an OpenTelemetry SDK span as the SDK adds it, without running
attributes guardtrace built itself through the SDK's cleaning again.

``Span.add_event`` passes every attribute through ``BoundedAttributes``' cleaning (type
checks against abstract base classes, a recursive copy, a lock taken per item): about
two thirds of what adding a guard event cost on the agent's thread (21 us of 32 per
event, measured beside this path at 6.5). :class:`GuardTelemetry` builds its events'
attributes itself: string keys, values that are str, int, float or bool, or lists of
them. For those the cleaning is a copy with lists made tuples, so :func:`add_event`
makes that copy and adds the event through the span's own ``_add_event`` (which takes
the span's lock and refuses an ended span, as ``add_event`` does).

Only where the result is the same: the SDK's own span class (``add_event`` not
overridden), no value-length limit in force (the SDK would cut long strings), no more
attributes than the event limit (it would drop the oldest), and only the value types
above. Anything else goes through ``span.add_event``. The SDK internals this relies on
are checked once, at import: if a release renames them, every event takes the public
path. tests/unit/test_sdk_events.py compares both paths' events.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import Event
from opentelemetry.sdk.trace import Span as SdkSpan

__all__ = ["add_event"]

_SCALARS = (str, int, float, bool)


def _internals_present() -> bool:
    """The SDK pieces the quick path uses are there (checked once; a span's ``_limits``
    is checked on each span)."""
    try:
        probe = BoundedAttributes(1, None, True, None)
        return (isinstance(getattr(probe, "_dict", None), dict)
                and callable(getattr(SdkSpan, "_add_event", None)))
    except Exception:  # noqa: BLE001 - any surprise means: use the public path
        return False


_QUICK = _internals_present()
_SDK_ADD_EVENT = SdkSpan.add_event


def add_event(span: Any, name: str, attributes: dict[str, Any]) -> None:
    """Add event ``name`` to ``span`` (recording); the event is the one
    ``span.add_event(name, attributes)`` would add."""
    cleaned = _cleaned(span, attributes) if _QUICK else None
    if cleaned is None:
        span.add_event(name, attributes)
        return
    limit = span._limits.max_event_attributes  # noqa: SLF001
    bounded = BoundedAttributes(limit, None, True, None)
    bounded._dict = cleaned  # noqa: SLF001 - what _set_items would have stored
    span._add_event(Event(name, bounded))  # noqa: SLF001


def _cleaned(span: Any, attributes: dict[str, Any]) -> dict[str, Any] | None:
    """``attributes`` as the SDK would store them, or None where it might store
    something else (or where ``span`` is not the SDK's own span)."""
    if type(span).add_event is not _SDK_ADD_EVENT or not isinstance(span, SdkSpan):
        return None
    limits = getattr(span, "_limits", None)
    if limits is None or limits.max_attribute_length is not None:
        return None
    if limits.max_event_attributes is not None and len(attributes) > limits.max_event_attributes:
        return None
    cleaned: dict[str, Any] = {}
    for key, value in attributes.items():
        if type(key) is not str or not key:
            return None
        kind = type(value)
        if kind in _SCALARS:
            cleaned[key] = value
        elif kind is list or kind is tuple:
            for item in value:
                if type(item) not in _SCALARS:
                    return None
            cleaned[key] = tuple(value)
        else:
            return None
    return cleaned
