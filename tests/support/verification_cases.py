"""The forced-verification case every adapter's tests drive: a character-level question,
the reasoning the ``reason`` call returns, the answer, and the lifecycle events seen."""

from __future__ import annotations

from typing import Any

from guardtrace.collectors.testing import Capture
from guardtrace.schemas import names

__all__ = ["ANSWER", "SPELLED", "STRAWBERRY", "verification_events"]

STRAWBERRY = "How many r's are in strawberry?"
SPELLED = "s-t-r-a-w-b-e-r-r-y: r at positions 3, 8 and 9, so strawberry has 3 r's."
ANSWER = "There are three r's in strawberry."


def verification_events(cap: Capture) -> list[tuple[str, str, Any]]:
    """(name, request id, agent) of each verification lifecycle event."""
    return [(e.name, e.attributes[names.ATTR_REQUEST_ID], e.attributes.get(names.ATTR_AGENT))
            for e in cap.events() if e.name.startswith("llm.verification")]
