"""Values of a stored span event the request page reads: where its finding was made, and
its list attributes (stored as JSON text, as the consumers store every attribute)."""

from __future__ import annotations

import json

from guardtrace.schemas import names
from guardtrace.store.queries import TraceEvent

__all__ = ["event_list", "found_in"]


def found_in(event: TraceEvent) -> str:
    """Where an event's finding was made: ``pipeline``, else in the agent's process (the
    hooks' own events carry no ``found_in``)."""
    return event.attributes.get(names.ATTR_FOUND_IN) or names.FOUND_IN_AGENT


def event_list(event: TraceEvent, key: str) -> tuple[str, ...]:
    """A list attribute's strings; () when absent, the text itself when it is no JSON list."""
    text = event.attributes.get(key, "")
    if not text:
        return ()
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return (text,)
    if not isinstance(value, list):
        return (text,)
    return tuple(v for v in value if isinstance(v, str))
